#include "tests/fuzz_nifti.h"

#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/sources/arrays/nifti.h"
#include "server/sources/arrays/nifti_file.h"
#include "tests/testdata.h"

namespace stoker {
namespace {

// The pixels as a 3-D volume (x = width, y = height / 4, z = 4), uint8 or
// int16 scaled, in NIfTI-1 or NIfTI-2.
std::string Volume(const std::vector<uint8_t>& gray, int width, int height, int version,
                   bool wide) {
  const int ny = height / 4;
  std::string voxels;
  for (size_t i = 0; i < static_cast<size_t>(width) * ny * 4; ++i) {
    if (wide) {
      const int16_t v = static_cast<int16_t>(gray[i] * 3 - 200);
      voxels.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      voxels += static_cast<char>(gray[i]);
    }
  }
  return testdata::NiftiBytes(version, {width, ny, 4}, wide ? 4 : 2, voxels,
                              wide ? 0.5 : 0.0);
}

}  // namespace

int RunNifti(const std::vector<uint8_t>& gray, int width, int height, const Mutator& mutate,
             Rng& rng, int n, const std::string& dir, std::map<std::string, int>* outcomes) {
  std::vector<std::string> bases;
  for (int version : {1, 2}) {
    for (bool wide : {false, true}) bases.push_back(Volume(gray, width, height, version, wide));
  }
  VolumeCache cache(64 << 20);
  SourceContext ctx;
  ctx.volumes = &cache;
  for (int m = 0; m < n; ++m) {
    const std::string& base = bases[rng.Below(bases.size())];
    std::string kind;
    // Mutated then compressed (header fields), or compressed then mutated
    // (the stream), or plain.
    const int form = static_cast<int>(rng.Below(3));
    std::string bytes = form == 1 ? mutate(testdata::Gzip(base), rng, &kind) : mutate(base, rng, &kind);
    if (form == 0) bytes = testdata::Gzip(bytes);
    const std::string path = absl::StrCat(dir, "/v", m % 4, form == 2 ? ".nii" : ".nii.gz");
    if (!testdata::WriteFile(path, bytes).ok()) return 1;
    absl::StatusOr<std::shared_ptr<const ArraySource>> a = OpenNiftiSource(path, "", ctx);
    absl::Status s = a.status();
    if (a.ok()) {
      const std::vector<uint64_t>& shape = (*a)->shape(0);
      uint64_t voxels = 1;
      std::vector<uint64_t> start(shape.size()), count(shape.size());
      for (size_t k = 0; k < shape.size(); ++k) {
        voxels *= shape[k];
        start[k] = rng.Below(shape[k]);
        count[k] = 1 + rng.Below(std::min<uint64_t>(shape[k] - start[k], 16));
      }
      if (shape.empty() || voxels == 0 || voxels > nifti::kMostVolumeBytes) {
        std::fprintf(stderr, "fuzz_nifti: opened a volume of %zu dims, %llu voxels\n",
                     shape.size(), static_cast<unsigned long long>(voxels));
        return 1;
      }
      uint64_t region = 1;
      for (uint64_t c : count) region *= c;
      std::vector<float> out(region);
      s = (*a)->Read(0, start.data(), count.data(), ElemType::kFloat32,
                     reinterpret_cast<uint8_t*>(out.data()));
    }
    ++(*outcomes)[absl::StrCat("nifti ", kind, " ", absl::StatusCodeToString(s.code()))];
  }
  return 0;
}

}  // namespace stoker
