#include "server/pipeline/spec_check.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "proto/schema.h"
#include "proto/spec_util.h"
#include "shm/ring.h"
#include "util/proto_json.h"
#include "util/status_macros.h"

namespace stoker {
namespace {

namespace pb = google::protobuf;

// Protobuf keeps an enum number it does not know (proto3 enums are open):
// every enum in `m`, nested messages included, must name a value.
absl::Status CheckEnums(const pb::Message& m, const std::string& prefix) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> set;
  r->ListFields(m, &set);
  for (const pb::FieldDescriptor* f : set) {
    const std::string name = prefix + f->name();
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string where = f->is_repeated() ? absl::StrCat(name, "[", i, "]") : name;
      if (f->type() == pb::FieldDescriptor::TYPE_ENUM) {
        const int v = f->is_repeated() ? r->GetRepeatedEnumValue(m, f, i)
                                       : r->GetEnumValue(m, f);
        if (f->enum_type()->FindValueByNumber(v) == nullptr)
          return absl::InvalidArgumentError(absl::StrCat(
              where, " ", v, " is not one of ", EnumShortNames(f->enum_type())));
      } else if (f->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
        STOKER_RETURN_IF_ERROR(CheckEnums(
            f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f),
            where + "."));
      }
    }
  }
  return absl::OkStatus();
}

// A source's kept members: names, each once, at most kMaxKeptMembers.
absl::Status CheckMembers(const pb::RepeatedPtrField<std::string>& kept,
                          const std::string& prefix) {
  if (kept.size() > static_cast<int>(kMaxKeptMembers))
    return absl::InvalidArgumentError(absl::StrCat(prefix, "members: ", kept.size(),
                                                   " members, at most ", kMaxKeptMembers));
  for (int i = 0; i < kept.size(); ++i) {
    if (!IsMemberName(kept[i]) ||
        std::find(kept.begin(), kept.begin() + i, kept[i]) != kept.begin() + i)
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, "members[", i, "] '", absl::CHexEscape(kept[i].substr(0, 40)),
          "' must be a new name of 1 to 32 of a-z 0-9 . _ - (as \"txt\")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDatasetSpec(const v1::DatasetSpec& ds) {
  if (ds.source_case() == v1::DatasetSpec::SOURCE_NOT_SET)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset needs a source: ", DatasetSourceNames()));
  if (const auto [where, field] = DatasetLocation(ds); where.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.", ds.GetDescriptor()->FindFieldByNumber(ds.source_case())->name(), ".",
        field, " is empty"));
  if (ds.has_webdataset())
    STOKER_RETURN_IF_ERROR(CheckMembers(ds.webdataset().members(), "dataset.webdataset."));
  if (ds.has_s3()) STOKER_RETURN_IF_ERROR(CheckMembers(ds.s3().members(), "dataset.s3."));
  return CheckRanges(ds, "dataset.");
}

absl::StatusOr<v1::DatasetSpec> SessionDataset(const v1::SessionSpec& spec) {
  v1::DatasetSpec ds = spec.dataset();
  for (const v1::FieldSpec& f : spec.fields()) {
    if (f.member().empty()) continue;
    pb::RepeatedPtrField<std::string>* kept =
        ds.has_webdataset() ? ds.mutable_webdataset()->mutable_members()
        : ds.has_s3()       ? ds.mutable_s3()->mutable_members()
                            : nullptr;
    if (kept == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", f.name(), "' reads member '", f.member(), "': members are read from "
          "WebDataset shards (dataset.webdataset, or dataset.s3 naming shards); other "
          "sources keep files"));
    if (std::find(kept->begin(), kept->end(), f.member()) == kept->end())
      kept->Add(std::string(f.member()));
  }
  STOKER_RETURN_IF_ERROR(CheckDatasetSpec(ds));  // The fields' members within the bound.
  return ds;
}

absl::StatusOr<Pipeline> CheckSessionSpec(v1::SessionSpec* completed) {
  auto bad = [](const std::string& msg) {
    return absl::InvalidArgumentError(msg);
  };
  STOKER_RETURN_IF_ERROR(ApplySessionDefaults(completed));
  const v1::SessionSpec& spec = *completed;
  STOKER_RETURN_IF_ERROR(CheckDatasetSpec(spec.dataset()));
  STOKER_RETURN_IF_ERROR(CheckEnums(spec, ""));
  STOKER_RETURN_IF_ERROR(CheckRanges(spec));
  if (spec.ring_slots() > shm::kMaxRingSlots)  // The schema's range is the ring's.
    return absl::InternalError(absl::StrCat("ring_slots ", spec.ring_slots(),
                                            " is more than a ring holds"));
  if (const uint32_t side = spec.pixel_cache().max_side(); side != 0) {
    if (side < 16 || side > kMaxSide)
      return bad(absl::StrCat("pixel_cache.max_side ", side, " must be 0 (automatic) or 16..",
                              kMaxSide));
    if (spec.pixel_cache().off())
      return bad("pixel_cache: off and a max_side exclude each other");
  }
  if (spec.has_client_decode() && spec.pixel_cache().max_side() != 0)
    return bad("client_decode and pixel_cache exclude each other: the pixel "
               "cache keeps pictures the daemon decoded");
  if (spec.slabs().memory() == v1::BatchSlabs::MEMORY_CUDA && spec.placement().gpu_bus_id().empty())
    return bad("slabs in GPU memory (MEMORY_CUDA) need placement.gpu_bus_id: the GPU they are on");
  if (spec.has_slabs() && spec.has_client_decode())
    return bad("slabs and client_decode exclude each other: a slab holds the daemon's pixels, "
               "and the client decodes after the batch is copied there");
  if (spec.fields_size() == 0) {  // A preset.
    if (spec.transform() != v1::TRANSFORM_VAL &&
        spec.transform() != v1::TRANSFORM_TRAIN)
      return bad("transform must be val or train (or give fields and a pipeline)");
    if (!ImageDTypeOk(spec.dtype()))
      return bad(absl::StrCat("dtype of the preset's image must be ", ImageDTypeNames()));
    if (spec.mean_size() != 3 || spec.std_size() != 3)
      return bad("mean and std must each have 3 values (or none for ImageNet's)");
    for (float s : spec.std()) {
      if (!(s > 0)) return bad(absl::StrCat("std values must be > 0, got ", s));
    }
  }
  STOKER_ASSIGN_OR_RETURN(Pipeline pipeline, Pipeline::Compile(spec));
  STOKER_RETURN_IF_ERROR(SessionDataset(spec).status());
  if (spec.rank() >= spec.world_size())
    return bad(absl::StrCat("rank ", spec.rank(),
                            " must be less than world_size ", spec.world_size()));
  return pipeline;
}

}  // namespace stoker
