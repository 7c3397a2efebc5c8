#!/usr/bin/python3
"""Write an ONNX text model as DIR/model.onnx with every initializer's data in
its own external file (onnx.save(..., save_as_external_data=True)).

  to_external_data.py MODEL.onnxtext DIR [--remove float|int]
                      [--set NAME:KEY=VALUE]...

--remove deletes the data files of the float (parameter) or integer
(constant) initializers afterwards. --set rewrites (or, with an empty VALUE,
drops) the external data entry KEY of initializer NAME. Lines starting with // (lit's RUN and
CHECK lines) are dropped before parsing.
"""
import argparse
import os

import onnx
import onnx.numpy_helper
import onnx.parser

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("out")
ap.add_argument("--remove", choices=["float", "int"])
ap.add_argument("--set", action="append", default=[])
args = ap.parse_args()

with open(args.model) as f:
    text = "".join(l for l in f if not l.lstrip().startswith("//"))
model = onnx.parser.parse_model(text)
# Only tensors stored as raw_data move to external files.
for t in model.graph.initializer:
    t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t), t.name))
os.makedirs(args.out, exist_ok=True)
onnx.save(model, os.path.join(args.out, "model.onnx"), save_as_external_data=True,
          all_tensors_to_one_file=False, size_threshold=0)
saved = onnx.load(os.path.join(args.out, "model.onnx"), load_external_data=False)
for edit in args.set:
    name, entry = edit.split(":", 1)
    key, value = entry.split("=", 1)
    t = next(t for t in saved.graph.initializer if t.name == name)
    entries = [(e.key, e.value) for e in t.external_data if e.key != key]
    if value:
        entries.append((key, value))
    del t.external_data[:]
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
if args.set:
    onnx.save(saved, os.path.join(args.out, "model.onnx"))
if args.remove:
    for t in saved.graph.initializer:
        is_float = t.data_type == onnx.TensorProto.FLOAT
        if is_float == (args.remove == "float"):
            location = {e.key: e.value for e in t.external_data}["location"]
            os.remove(os.path.join(args.out, location))
