// The NIfTI part of the sanitizer's fuzz run (tests/fuzz_decode.cc):
// mutated NIfTI-1 and NIfTI-2 volumes of a photo's pixels, plain and
// gzip-compressed, opened as a nifti source and read whole and by region
// through a volume cache. Every outcome must be a status; ASan and UBSan
// catch any read or write out of bounds.
#ifndef STOKER_TESTS_FUZZ_NIFTI_H_
#define STOKER_TESTS_FUZZ_NIFTI_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/rng.h"

namespace stoker {

// A mutation of a file's bytes; *kind names it.
using Mutator = std::function<std::string(const std::string&, Rng&, std::string* kind)>;

// Runs `n` mutations of volumes made of `gray` (width x height bytes) in
// `dir`, counting outcomes by kind and status code. 0, or 1 after saying
// what went wrong (a volume read that succeeded with an impossible shape).
int RunNifti(const std::vector<uint8_t>& gray, int width, int height, const Mutator& mutate,
             Rng& rng, int n, const std::string& dir, std::map<std::string, int>* outcomes);

}  // namespace stoker

#endif  // STOKER_TESTS_FUZZ_NIFTI_H_
