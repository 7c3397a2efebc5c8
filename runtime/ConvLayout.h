//===- ConvLayout.h - How CPU convolutions lay out a product ----*- C++ -*-===//
//
// The CPU convolutions (runtime/kernels/cpu/Conv.cpp) run one product an
// image, unless the images are small: then they stack every image's columns
// side by side and run one product for the batch, which reads the filter
// once instead of once an image (ResNet's last stage: 1x1 images, a 9.4 MB
// filter). The planner costs them the same way (passes/OpCost.cpp), so the
// rule lives here, with no dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_CONVLAYOUT_H
#define LOOM_RUNTIME_CONVLAYOUT_H

#include <cstdint>

namespace loom::runtime {

/// The most columns (images x output pixels) a stacked product has.
inline constexpr int64_t kConvStackedColumns = 256;

/// Whether a convolution of `images` images, `groups` groups and `pixels`
/// output pixels an image runs one stacked product.
inline bool convStacksImages(int64_t images, int64_t groups, int64_t pixels) {
  return groups == 1 && images > 1 && images * pixels <= kConvStackedColumns;
}

} // namespace loom::runtime

#endif // LOOM_RUNTIME_CONVLAYOUT_H
