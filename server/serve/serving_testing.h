// Test helpers for the reader and decode stages: a pipeline compiled from
// JSON, its fields' bytes per sample, and an in-memory slot for one sample.
// Tests only.
#ifndef STOKER_SERVER_SERVE_SERVING_TESTING_H_
#define STOKER_SERVER_SERVE_SERVING_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"
#include "server/serve/sample_reader.h"
#include "shm/ring.h"
#include "util/proto_json.h"

namespace stoker {

inline v1::SessionSpec SpecOf(const std::string& json) {
  v1::SessionSpec spec;
  EXPECT_TRUE(JsonToProto(json, &spec).ok()) << json;
  if (spec.batch_size() == 0) spec.set_batch_size(1);
  return spec;
}

inline Pipeline PipelineOf(const std::string& json) {
  absl::StatusOr<Pipeline> p = Pipeline::Compile(SpecOf(json));
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

// Each field's bytes per sample, as the ring lays them out.
inline std::vector<uint64_t> FieldBytesOf(const Pipeline& p) {
  absl::StatusOr<shm::RingLayout> layout = shm::ComputeLayout(p.Geometry(1, 1));
  EXPECT_TRUE(layout.ok()) << layout.status();
  std::vector<uint64_t> bytes;
  for (uint32_t f = 0; f < layout->field_count; ++f) bytes.push_back(layout->fields[f].sample_bytes);
  return bytes;
}

// One sample's fields in memory, each filled with `fill` first.
struct MemorySlot {
  explicit MemorySlot(const std::vector<uint64_t>& field_bytes, uint8_t fill = 0xAB) {
    for (uint64_t n : field_bytes) fields.emplace_back(n, fill);
    for (size_t f = 0; f < fields.size(); ++f) out.field[f] = fields[f].data();
  }
  std::vector<std::vector<uint8_t>> fields;
  SampleOut out;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SERVE_SERVING_TESTING_H_
