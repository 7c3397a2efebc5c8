//===- CheckpointTest.cpp - Sharded checkpoints, resharded on load --------===//
//
// The sharded test model (ShardedModel.h) saved under one mesh and loaded
// under another (4 ranks -> 1, 1 -> 4), with the ranks as threads; damaged
// checkpoints (a flipped byte, a missing file, an edited manifest, another
// model) refused in one line, and --resume falling back past them; the
// newest K kept; a folder left by a killed writer ignored.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "ShardedModel.h"
#include "runtime/comm/ThreadCommunicator.h"
#include "runtime/support/Checksum.h"

#include <cstring>
#include <filesystem>

using namespace loom::runtime;
using namespace loom::runtime::test;

namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ShardedModelTest {
protected:
  TrainingPosition position(int64_t step) const {
    TrainingPosition p;
    p.step = step;
    p.globalBatch = 8;
    p.dataSamples = 64;
    return p;
  }

  /// Saves the sessions of `plan` (ranks as threads, parameters from
  /// `init`) as the checkpoint of `step` in `ckpt`; each rank first adds
  /// `shift` to its buffers.
  void save(const plan::Plan &plan, int64_t step, ParameterInit init = {},
            float shift = 0, int keep = 0) {
    std::vector<std::string> errors =
        runRanks(plan.world_size(), [&](Communicator &world) {
          LOOM_ASSIGN_OR_RETURN(
              auto s, Session::create(plan, world, "p", nullptr, init));
          for (const plan::Buffer &b : s->executor().program().buffers()) {
            std::vector<float> v = s->executor().readBuffer(b).toF32();
            for (float &x : v)
              x += shift;
            LOOM_RETURN_IF_ERROR(s->executor().writeBuffer(
                b, HostTensor::fromF32(bufferShape(b), v)));
          }
          return saveCheckpoint(*s, world, ckpt(), position(step), keep);
        });
    for (size_t r = 0; r < errors.size(); ++r)
      ASSERT_EQ(errors[r], "") << "rank " << r;
  }

  std::string ckpt() const { return dir + "/ckpt"; }
};

/// Every parameter of a one-rank session, by name.
std::map<std::string, std::vector<float>> values(Session &s) {
  std::map<std::string, std::vector<float>> out;
  for (const Param &p : kParams)
    out[p.name] = s.readBuffer(p.name)->toF32();
  return out;
}

TEST_F(CheckpointTest, FourShardedRanksLoadOnOneAndBack) {
  save(makeShardedPlan(2, 2, true), 10, {}, /*shift=*/0.5f);
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(ckpt() + "/step-00000010"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  // Replicas take turns: every rank writes some of the 5 tensors' shards.
  EXPECT_EQ(files, (std::vector<std::string>{"manifest.json", "rank-00000.bin",
                                             "rank-00001.bin", "rank-00002.bin",
                                             "rank-00003.bin"}));

  // One rank, starting from other values: the global tensors come back.
  LocalCommunicator one;
  ParameterInit random{/*random=*/true, /*seed=*/7};
  auto whole = Session::create(makeShardedPlan(1, 1, false), one, "one",
                               nullptr, random);
  ASSERT_TRUE(whole.isOk()) << whole.status().message();
  int64_t warnings = 0;
  auto loaded = resumeFromCheckpoints(**whole, one, ckpt(), position(0),
                                      [&](const std::string &) { ++warnings; });
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->step, 10);
  EXPECT_EQ(warnings, 0);
  std::map<std::string, std::vector<float>> got = values(**whole);
  for (const Param &p : kParams) {
    std::vector<float> want = initializer(p);
    for (float &x : want)
      x += 0.5f;
    EXPECT_EQ(got[p.name], want) << p.name;
  }

  // Saved by the one rank, loaded by four: each takes its slice.
  auto back = Session::create(makeShardedPlan(1, 1, false), one, "one", nullptr,
                              random);
  ASSERT_TRUE(back.isOk());
  std::map<std::string, std::vector<float>> randomValues = values(**back);
  ASSERT_TRUE(saveCheckpoint(**back, one, ckpt(), position(20), 0).isOk());
  plan::Plan sharded = makeShardedPlan(2, 2, true);
  std::vector<std::string> errors = runRanks(4, [&](Communicator &world) {
    LOOM_ASSIGN_OR_RETURN(auto s, Session::create(sharded, world, "p"));
    LOOM_ASSIGN_OR_RETURN(auto at, resumeFromCheckpoints(*s, world, ckpt(),
                                                         position(0), nullptr));
    if (!at || at->step != 20)
      return makeError("resumed at the wrong step");
    int r = world.rank();
    for (const Param &p : kParams) {
      std::vector<float> want = sliceOf(p, randomValues[p.name], r / 2, r % 2);
      if (s->readBuffer(p.name)->toF32() != want)
        return makeError("rank %d: %s differs", r, p.name.c_str());
    }
    return Status::ok();
  });
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

/// The error of loading `path` into a one-rank session of `plan`.
std::string loadError(const plan::Plan &plan, const std::string &path,
                      const TrainingPosition &position, bool *fatal = nullptr) {
  LocalCommunicator one;
  auto s = Session::create(plan, one, "one");
  if (!s.isOk())
    return "session: " + s.status().message();
  LoadFailure failure;
  auto loaded = loadCheckpoint(**s, path, position, &failure);
  if (fatal)
    *fatal = failure.fatal;
  return loaded.isOk() ? "" : loaded.status().message();
}

void flipByte(const std::string &path, int64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 1;
  f.seekp(at);
  f.write(&c, 1);
}

TEST_F(CheckpointTest, DamagedOrForeignCheckpointsAreRefusedInOneLine) {
  plan::Plan plan = makeShardedPlan(1, 1, false);
  save(plan, 10);
  std::string path = checkpointPath(ckpt(), 10);
  ASSERT_EQ(loadError(plan, path, position(0)), "");

  // Another model: one more parameter, or one of another shape.
  plan::Plan more = plan;
  plan::Buffer &extra = buffer(
      *more.mutable_programs(0),
      addBuffer(*more.mutable_programs(0), "extra", plan::PARAMETER, {2}));
  extra.set_binding("extra");
  extra.set_zeros(true);
  EXPECT_EQ(loadError(more, path, position(0)),
            path + " holds no parameter 'extra': a checkpoint of another "
                   "model");
  plan::Plan fewer = makeShardedPlan(1, 1, false);
  fewer.mutable_programs(0)->mutable_buffers()->RemoveLast();
  EXPECT_EQ(loadError(fewer, path, position(0)),
            path + " holds the running stat 'bn.running_mean', which the plan "
                   "has not: a checkpoint of another model");

  // Another global batch: fatal, every checkpoint of the run has it.
  TrainingPosition other = position(0);
  other.globalBatch = 16;
  bool fatal = false;
  EXPECT_EQ(loadError(plan, path, other, &fatal),
            path + " was written by a run of global batch 8, and this plan's "
                   "is 16; compile the plan with --global-batch 8 to resume "
                   "it");
  EXPECT_TRUE(fatal);

  // A flipped byte in a block.
  flipByte(path + "/rank-00000.bin", 5);
  std::string flipped = loadError(plan, path, position(0), &fatal);
  EXPECT_NE(flipped.find("the block at byte 0 of '" + path +
                         "/rank-00000.bin' has checksum fnv1a64:"),
            std::string::npos)
      << flipped;
  EXPECT_NE(flipped.find("(a damaged checkpoint)"), std::string::npos);
  EXPECT_FALSE(fatal);
  flipByte(path + "/rank-00000.bin", 5);
  ASSERT_EQ(loadError(plan, path, position(0)), "");

  // An edited manifest: a step changed, a value still in range.
  std::ifstream in(path + "/manifest.json");
  std::string json((std::istreambuf_iterator<char>(in)), {});
  in.close();
  std::string edited = json;
  size_t at = edited.find("\"step\": \"10\"");
  ASSERT_NE(at, std::string::npos) << json;
  edited.replace(at, 12, "\"step\": \"11\"");
  std::ofstream(path + "/manifest.json") << edited;
  std::string manifestError = loadError(plan, path, position(0));
  EXPECT_NE(manifestError.find("the manifest's checksum"), std::string::npos)
      << manifestError;
  std::ofstream(path + "/manifest.json") << "{\"format_version\": 1, \"nope\"";
  EXPECT_NE(
      loadError(plan, path, position(0)).find("not a checkpoint manifest"),
      std::string::npos);
  std::ofstream(path + "/manifest.json") << json;

  // A missing shard file.
  fs::remove(path + "/rank-00000.bin");
  std::string missing = loadError(plan, path, position(0));
  EXPECT_NE(missing.find("cannot open '" + path + "/rank-00000.bin'"),
            std::string::npos)
      << missing;
  EXPECT_EQ(missing.find('\n'), std::string::npos);
}

TEST_F(CheckpointTest, ResumeFallsBackPastADamagedCheckpoint) {
  plan::Plan plan = makeShardedPlan(1, 1, false);
  save(plan, 10, {}, 1.f);
  save(plan, 20, {}, 2.f);
  flipByte(checkpointPath(ckpt(), 20) + "/rank-00000.bin", 0);
  LocalCommunicator one;
  auto s = Session::create(plan, one, "one");
  ASSERT_TRUE(s.isOk());
  std::vector<std::string> warnings;
  auto loaded = resumeFromCheckpoints(
      **s, one, ckpt(), position(0),
      [&](const std::string &why) { warnings.push_back(why); });
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step-00000020"), std::string::npos);
  std::vector<float> want = initializer(kParams[0]);
  for (float &x : want)
    x += 1.f;
  EXPECT_EQ((*s)->readBuffer(kParams[0].name)->toF32(), want);

  // None loads: an error naming the folder; none there: a fresh start.
  flipByte(checkpointPath(ckpt(), 10) + "/rank-00000.bin", 0);
  auto none = resumeFromCheckpoints(**s, one, ckpt(), position(0), nullptr);
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().message(),
            "--resume: none of the 2 checkpoint(s) in '" + ckpt() +
                "' loads (each is named above); resume from another folder, "
                "or start again without --resume");
  auto fresh =
      resumeFromCheckpoints(**s, one, dir + "/empty", position(0), nullptr);
  ASSERT_TRUE(fresh.isOk());
  EXPECT_FALSE(fresh->has_value());
}

TEST_F(CheckpointTest, KeepsTheNewestAndIgnoresAKilledWritersFolder) {
  plan::Plan plan = makeShardedPlan(2, 2, true);
  save(plan, 10, {}, 0, /*keep=*/2);
  save(plan, 20, {}, 0, 2);
  // A writer killed mid-write leaves its .partial folder: not a checkpoint.
  fs::create_directories(ckpt() + "/step-00000030.partial");
  std::ofstream(ckpt() + "/step-00000030.partial/rank-00000.bin") << "cut";
  EXPECT_EQ(listCheckpoints(ckpt()), (std::vector<int64_t>{20, 10}));
  save(plan, 30, {}, 0, 2);
  EXPECT_EQ(listCheckpoints(ckpt()), (std::vector<int64_t>{30, 20}));
  EXPECT_FALSE(fs::exists(ckpt() + "/step-00000030.partial"));
  EXPECT_EQ(loadError(makeShardedPlan(1, 1, false), checkpointPath(ckpt(), 30),
                      position(0)),
            "");
  // The same step again (a run resumed from before it) replaces it.
  save(plan, 30, {}, 0, 2);
  EXPECT_EQ(listCheckpoints(ckpt()), (std::vector<int64_t>{30, 20}));
}

} // namespace

namespace {

namespace checkpoint = loom::checkpoint;

/// A block holding the whole of a tensor of `rows` rows of one chunk each.
checkpoint::Tensor rowsOfOneChunk(int64_t rows) {
  checkpoint::Tensor t;
  t.set_dtype(plan::F32);
  t.add_global_shape(rows);
  t.add_global_shape(kChunkBytes / 4);
  checkpoint::Block *b = t.add_blocks();
  b->set_file("rank-00000.bin");
  b->set_size_bytes(rows * kChunkBytes);
  b->set_chunk_bytes(kChunkBytes);
  for (int64_t r = 0; r < rows; ++r)
    b->add_chunk_checksums("fnv1a64:0");
  b->add_dims()->add_runs()->set_length(rows);
  b->add_dims()->add_runs()->set_length(kChunkBytes / 4);
  return t;
}

TEST(CheckpointChunksTest, AShardReadsOnlyTheChunksThatHoldIt) {
  checkpoint::Tensor t = rowsOfOneChunk(4);
  int64_t cols = kChunkBytes / 4;
  // Rows 1 and 2 of 4: the second and third chunks.
  ShardLayout mine;
  mine.global = {4, cols};
  mine.local = {2, cols};
  mine.dims = {{{1, 0, 2}}, {{0, 0, cols}}};
  std::vector<std::vector<bool>> asked;
  auto read =
      [&](const checkpoint::Block &b,
          const std::vector<bool> &chunks) -> StatusOr<std::vector<uint8_t>> {
    asked.push_back(chunks);
    std::vector<float> rows(static_cast<size_t>(4 * cols));
    for (size_t i = 0; i < rows.size(); ++i)
      rows[i] = static_cast<float>(i / cols);
    std::vector<uint8_t> bytes(static_cast<size_t>(b.size_bytes()));
    std::memcpy(bytes.data(), rows.data(), bytes.size());
    return bytes;
  };
  std::vector<float> dst(static_cast<size_t>(2 * cols), -1);
  ASSERT_TRUE(loadShard(t, mine, 4, read, dst.data(), 1, "t").isOk());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(dst.front(), 1.0f);
  EXPECT_EQ(dst.back(), 2.0f);

  // The whole tensor asks for every chunk (read whole, one checksum).
  ShardLayout whole;
  whole.global = whole.local = {4, cols};
  whole.dims = {{{0, 0, 4}}, {{0, 0, cols}}};
  std::vector<float> all(static_cast<size_t>(4 * cols));
  ASSERT_TRUE(loadShard(t, whole, 4, read, all.data(), 0, "t").isOk());
  EXPECT_EQ(asked.back(), std::vector<bool>(4, true));
}

TEST_F(CheckpointTest, ChunksNotReadAreNotChecked) {
  // A file of three chunks and a bit, as a block with its checksums.
  fs::create_directories(ckpt());
  int64_t size = 3 * kChunkBytes + 4096;
  std::vector<char> bytes(static_cast<size_t>(size));
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 7 + i / 4099);
  std::ofstream(ckpt() + "/rank-00000.bin", std::ios::binary)
      .write(bytes.data(), size);
  checkpoint::Block b;
  b.set_file("rank-00000.bin");
  b.set_size_bytes(size);
  b.set_checksum(checksumText(fnv1a64({bytes.data(), bytes.size()})));
  b.set_chunk_bytes(kChunkBytes);
  ASSERT_EQ(chunkCount(size), 4);
  for (int64_t c = 0; c < 4; ++c) {
    int64_t end = std::min(size, (c + 1) * kChunkBytes);
    b.add_chunk_checksums(
        checksumText(fnv1a64({bytes.data() + c * kChunkBytes,
                              static_cast<size_t>(end - c * kChunkBytes)})));
  }
  std::vector<bool> lastTwo = {false, false, true, true};
  {
    CheckpointFiles files(ckpt());
    auto got = files.read(b, lastTwo, "t");
    ASSERT_TRUE(got.isOk()) << got.status().message();
    EXPECT_EQ(files.bytesRead(), kChunkBytes + 4096);
    EXPECT_EQ(std::memcmp(bytes.data() + 2 * kChunkBytes,
                          got->data() + 2 * kChunkBytes,
                          static_cast<size_t>(size - 2 * kChunkBytes)),
              0);
  }
  // A flipped byte in the first chunk: the last two still read; the whole
  // block and the first chunk do not.
  flipByte(ckpt() + "/rank-00000.bin", 100);
  CheckpointFiles files(ckpt());
  EXPECT_TRUE(files.read(b, lastTwo, "t").isOk());
  auto whole = files.read(b, {}, "t");
  ASSERT_FALSE(whole.isOk());
  EXPECT_NE(whole.status().message().find("t: the block at byte 0 of"),
            std::string::npos)
      << whole.status().message();
  auto first = files.read(b, {true, false, false, false}, "t");
  ASSERT_FALSE(first.isOk());
  EXPECT_NE(first.status().message().find("t: the chunk at byte 0 of"),
            std::string::npos)
      << first.status().message();
  // Chunk checksums that do not fit the block are an edited manifest.
  b.mutable_chunk_checksums()->RemoveLast();
  auto edited = files.read(b, lastTwo, "t");
  ASSERT_FALSE(edited.isOk());
  EXPECT_NE(edited.status().message().find("lists 3 chunk checksum(s)"),
            std::string::npos)
      << edited.status().message();
}

} // namespace
