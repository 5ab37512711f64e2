// The source registry.
#include "absl/strings/str_cat.h"
#include "proto/spec_util.h"
#include "server/sources/source.h"
#include "util/status_macros.h"

namespace stoker {

#define STOKER_SOURCE(name) const SourceKind& name();
#include "server/sources/sources.def"
#undef STOKER_SOURCE

const std::vector<const SourceKind*>& AllSources() {
  static const std::vector<const SourceKind*> all = {
#define STOKER_SOURCE(name) &name(),
#include "server/sources/sources.def"
#undef STOKER_SOURCE
  };
  return all;
}

const SourceKind* FindSource(v1::DatasetSpec::SourceCase source_case) {
  for (const SourceKind* k : AllSources()) {
    if (k->source_case() == source_case) return k;
  }
  return nullptr;
}

absl::StatusOr<Dataset> OpenDataset(const v1::DatasetSpec& spec, const SourceContext& ctx) {
  const SourceKind* kind = FindSource(spec.source_case());
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset needs a source this daemon reads: one of ", DatasetSourceNames()));
  }
  SourceContext confined = ctx;
  confined.limits.within = ctx.beneath.get();
  STOKER_ASSIGN_OR_RETURN(Dataset ds, kind->Open(spec, confined));
  const uint32_t per_volume = spec.samples_per_volume();
  if (per_volume <= 1) return ds;
  const ArraySource* arrays = ds.source->arrays();
  if (arrays == nullptr)
    return absl::InvalidArgumentError(
        "dataset.samples_per_volume applies to array sources (npy, hdf5, nifti), whose samples "
        "are volumes");
  STOKER_ASSIGN_OR_RETURN(
      std::shared_ptr<const ArraySource> repeated,
      RepeatArrays(std::shared_ptr<const ArraySource>(ds.source, arrays), per_volume,
                   ctx.limits.max_files, DatasetPath(spec)));
  return ArrayDataset(std::move(repeated),
                      absl::StrCat(ds.description, " x", per_volume, " per volume"), ctx.limits);
}

}  // namespace stoker
