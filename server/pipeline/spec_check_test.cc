#include "server/pipeline/spec_check.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "proto/schema.h"
#include "proto/spec_util.h"
#include "shm/ring.h"
#include "util/proto_json.h"

namespace stoker {
namespace {

// A valid preset spec with `extra` JSON members added.
v1::SessionSpec Spec(const std::string& extra) {
  v1::SessionSpec spec;
  const std::string json =
      R"({"dataset": {"folder": {"path": "/data"}}, "batch_size": 8, )"
      R"("transform": "train", "image_size": 32)" +
      (extra.empty() ? "" : ", " + extra) + "}";
  absl::Status s = JsonToProto(json, &spec);
  EXPECT_TRUE(s.ok()) << json << ": " << s;
  return spec;
}

absl::StatusOr<Pipeline> Check(v1::SessionSpec spec) { return CheckSessionSpec(&spec); }

TEST(SpecCheck, AValidPresetCompilesToItsFields) {
  auto p = Check(Spec(""));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->fields().size(), 2u);
  EXPECT_EQ(p->fields()[0].name, "image");
  EXPECT_EQ(p->fields()[1].name, "label");
  EXPECT_FALSE(p->deterministic());  // train: a random crop and flip.
}

TEST(SpecCheck, AValidFieldSpecCompilesItsPipeline) {
  v1::SessionSpec spec;
  ASSERT_TRUE(JsonToProto(R"({"dataset": {"npy": {"path": "/d/x.npy"}},
      "batch_size": 4, "fields": [{"name": "x", "kind": "array",
      "dtype": "float32", "shape": [8]}], "pipeline": []})", &spec).ok());
  auto p = Check(spec);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->has_arrays());
  EXPECT_FALSE(p->has_spatial());
  EXPECT_TRUE(p->deterministic());
}

// Every rule: INVALID_ARGUMENT whose message names the field and its range.
TEST(SpecCheck, EachRuleNamesTheField) {
  struct Case {
    const char* extra;
    const char* words;
  };
  const Case cases[] = {
      {R"("batch_size": 0)", "batch_size 0 must be in 1..65536"},
      {R"("batch_size": 65537)", "batch_size 65537 must be in 1..65536"},
      {R"("on_error": 7)", "on_error 7 is not one of replace, raise, zeros"},
      {R"("decode": 9)", "decode 9 is not one of"},
      {R"("fields": [{"name": "x", "kind": 12, "shape": [2]}])", "fields[0].kind 12 is not one of"},
      {R"("pixel_cache": {"max_side": 8})", "pixel_cache.max_side 8 must be 0 (automatic) or 16..16384"},
      {R"("pixel_cache": {"max_side": 64}, "client_decode": {})",
       "client_decode and pixel_cache exclude each other"},
      {R"("pixel_cache": {"max_side": 64, "off": true})",
       "pixel_cache: off and a max_side exclude each other"},
      {R"("dtype": "int64")", "dtype of the preset's image must be uint8 or float32/float16/bfloat16"},
      {R"("image_size": 0)", "image_size 0 must be in 1..4096"},
      {R"("image_size": 4097)", "image_size 4097 must be in 1..4096"},
      {R"("mean": [0.5, 0.5])", "mean and std must each have 3 values"},
      {R"("std": [0.5, 0, 0.5])", "std values must be > 0, got 0"},
      {R"("rank": 2, "world_size": 2)", "rank 2 must be less than world_size 2"},
      {R"("rank": 1)", "rank 1 must be less than world_size 1"},
      {R"("start_batch": "18446744073709551615")",
       "start_batch 18446744073709551615 must be at most 4611686018427387904"},
      {R"("partitions": 65537)", "partitions 65537 must be in 1..65536"},
      {R"("exchange": 1.5)", "exchange 1.5 must be in 0..1"},
      {R"("exchange": "NaN")", "exchange nan must be in 0..1"},
      {R"("exchange": -0.25)", "exchange -0.25 must be in 0..1"},
      {R"("partitions": 0)", "partitions 0 must be in 1..65536"},
      {R"("priority": 17)", "priority 17 must be in 1..16"},
      {R"("priority": 0)", "priority 0 must be in 1..16"},
      {R"("ring_slots": 257)", "ring_slots 257 must be in 2..256"},
      {R"("ring_slots": 1)", "ring_slots 1 must be in 2..256"},
      {R"("world_size": 0)", "world_size 0 must be at least 1"},
      {R"("pipeline": [{"flip": {}}])", "pipeline needs fields"},
      {R"("client_decode": {"cpu_share": 1.5})", "client_decode.cpu_share 1.5 must be in 0..1"},
      {R"("client_decode": {"max_bytes": 0})",
       "client_decode.max_bytes 0 must be in 1024..67108864"},
  };
  for (const Case& c : cases) {
    auto p = Check(Spec(c.extra));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.extra;
    EXPECT_NE(p.status().message().find(c.words), std::string::npos)
        << c.extra << " -> " << p.status();
  }
}

TEST(SpecCheck, APresetNeedsItsTransform) {
  v1::SessionSpec spec = Spec("");
  spec.set_transform(v1::TRANSFORM_UNSPECIFIED);
  EXPECT_EQ(Check(spec).status().message(),
            "transform must be val or train (or give fields and a pipeline)");
}

TEST(SpecCheck, FieldsAndThePresetExcludeEachOther) {
  v1::SessionSpec spec = Spec(
      R"("fields": [{"name": "image", "kind": "image", "shape": [8, 8, 3]}])");
  auto p = Check(spec);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("fields/pipeline replace the preset"),
            std::string::npos) << p.status();
}

TEST(SpecCheck, TheDatasetNeedsASourceAndAPath) {
  v1::SessionSpec spec = Spec("");
  spec.mutable_dataset()->clear_source();
  EXPECT_EQ(Check(spec).status().message(),
            "dataset needs a source: " + DatasetSourceNames());
  EXPECT_NE(DatasetSourceNames().find("folder, "), std::string::npos);
  spec = Spec("");
  spec.mutable_dataset()->mutable_lmdb()->set_path("");
  auto p = Check(spec);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "dataset.lmdb.path is empty");
  spec = Spec("");
  spec.mutable_dataset()->set_samples_per_volume(65536);
  EXPECT_TRUE(Check(spec).ok());
  spec.mutable_dataset()->set_samples_per_volume(65537);
  EXPECT_EQ(Check(spec).status().message(),
            "dataset.samples_per_volume 65537 must be in 1..65536");
}

// The daemon completes a spec with the schema's defaults: what a session
// runs with is what the schema says, written nowhere else.
TEST(SpecCheck, ASpecIsCompletedWithTheSchemasDefaults) {
  v1::SessionSpec spec = Spec("");
  ASSERT_TRUE(CheckSessionSpec(&spec).ok());
  const v1::SessionSpec& d = SessionDefaults();
  EXPECT_EQ(spec.ring_slots(), d.ring_slots());
  EXPECT_EQ(spec.partitions(), d.partitions());
  EXPECT_EQ(spec.exchange(), d.exchange());
  EXPECT_EQ(spec.world_size(), d.world_size());
  EXPECT_EQ(spec.priority(), d.priority());
  EXPECT_EQ(spec.image_size(), 32u);  // Given.
  EXPECT_EQ(spec.mean_size(), 3);
  // The ring's own bound is the schema's (a ring of more slots cannot be).
  const v1::SessionSpec most = Spec(R"("ring_slots": 256)");
  EXPECT_TRUE(Check(most).ok());
  EXPECT_EQ(shm::kMaxRingSlots, 256u);
  EXPECT_EQ(shm::kMaxRingBatch, 65536u);
  EXPECT_TRUE(Check(Spec(R"("batch_size": 65536)")).ok());
  // A custom pipeline leaves the preset's settings unset.
  spec.Clear();
  ASSERT_TRUE(JsonToProto(R"({"dataset": {"npy": {"path": "/d/x.npy"}}, "batch_size": 4,
      "fields": [{"name": "x", "kind": "array", "dtype": "float32", "shape": [8]}]})",
                          &spec).ok());
  ASSERT_TRUE(CheckSessionSpec(&spec).ok());
  EXPECT_FALSE(spec.has_image_size());
  EXPECT_EQ(spec.mean_size(), 0);
  EXPECT_EQ(spec.ring_slots(), d.ring_slots());
}

// The dataset a session opens keeps the members its fields name, once
// each, local shards or shards in an object store; a source that keeps
// files refuses a member field at once.
TEST(SpecCheck, MemberFieldsAddTheirMembersToTheShardsKept) {
  v1::SessionSpec spec;
  ASSERT_TRUE(JsonToProto(R"({"dataset": {"webdataset": {"path": "/d", "members": ["json"]}},
      "batch_size": 4, "fields": [
      {"name": "image", "kind": "image", "shape": [8, 8, 3]},
      {"name": "a", "kind": "encoded", "dtype": "uint8", "shape": [68], "member": "txt"},
      {"name": "b", "kind": "encoded", "dtype": "uint8", "shape": [68], "member": "txt"},
      {"name": "c", "kind": "encoded", "dtype": "uint8", "shape": [68], "member": "json"}],
      "pipeline": [{"center_crop": {"width": 8, "height": 8}}]})",
                          &spec).ok());
  ASSERT_TRUE(Check(spec).ok()) << Check(spec).status();
  auto ds = SessionDataset(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(std::vector<std::string>(ds->webdataset().members().begin(),
                                     ds->webdataset().members().end()),
            (std::vector<std::string>{"json", "txt"}));
  // The members a dataset keeps are bounded, named plainly and new.
  for (const auto& [members, words] : std::vector<std::pair<std::string, std::string>>{
           {R"(["a", "b", "c", "d", "e", "f"])", "members: 8 members, at most 6"},
           {R"(["TXT"])", "members[0] 'TXT' must be a new name"},
           {R"(["txt", "txt"])", "members[1] 'txt' must be a new name"}}) {
    for (const std::string kind : {"webdataset", "s3"}) {
      v1::SessionSpec many = spec;
      ASSERT_TRUE(JsonToProto(R"({")" + kind + R"(": {")" +
                                  (kind == "s3" ? "url" : "path") +
                                  R"(": "s3://b/d/", "members": )" + members + "}}",
                              many.mutable_dataset())
                      .ok());
      EXPECT_NE(Check(many).status().message().find("dataset." + kind + "." + words),
                std::string::npos)
          << members << ": " << Check(many).status();
    }
  }
  spec.mutable_dataset()->mutable_s3()->set_url("s3://b/train-{0..9}.tar");
  ds = SessionDataset(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(std::vector<std::string>(ds->s3().members().begin(), ds->s3().members().end()),
            (std::vector<std::string>{"txt", "json"}));
  spec.mutable_dataset()->mutable_folder()->set_path("/d");
  EXPECT_NE(Check(spec).status().message().find(
                "field 'a' reads member 'txt': members are read from WebDataset shards"),
            std::string::npos)
      << Check(spec).status();
}

}  // namespace
}  // namespace stoker
