// A .npy file's bytes for an array, as numpy writes them (version 1.0,
// C order, the header padded to 64 bytes): what tests and the fuzz run
// read back. Tests only.
#ifndef STOKER_SERVER_SOURCES_ARRAYS_NPY_TESTING_H_
#define STOKER_SERVER_SOURCES_ARRAYS_NPY_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/dataset/array_source.h"

namespace stoker {

inline std::string NpyBytes(ElemType type, const std::vector<uint64_t>& shape,
                            const void* data) {
  static const char* kDescr[] = {"|b1", "|i1", "|u1", "<i2", "<u2", "<i4",
                                 "<u4", "<i8", "<u8", "<f2", "<f4", "<f8"};
  std::string dims;
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    absl::StrAppend(&dims, d, ",");
    elements *= d;
  }
  if (shape.size() > 1) dims.pop_back();
  std::string dict = absl::StrCat("{'descr': '", kDescr[static_cast<int>(type)],
                                  "', 'fortran_order': False, 'shape': (", dims, "), }");
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char*>(data), elements * ElemBytes(type));
  return out;
}

}  // namespace stoker

#endif  // STOKER_SERVER_SOURCES_ARRAYS_NPY_TESTING_H_
