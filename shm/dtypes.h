// The one table of element types. Every type an array file may store is a
// row; the rows with a ring code are also the dtypes a batch field may have
// (the ring header's codes, the proto DType's numbers + 1, stoker.h's
// STOKER_DTYPE_*). A row's traits decide everything a dtype decides: its
// size, its class (a float, and so how a float32 value is rounded into it:
// server/imaging/elements.h), its numpy and torch names, and the struct format of a
// memoryview of one element. No unit branches on a dtype's identity for any
// of these; it asks the table. The C ABI hands the field rows to clients as
// JSON (stoker_dtypes_json), so no client restates them.
//
// Adding a type: a row here (appended: the enumerators' values are not
// persisted, but keep them stable), its conversions in server/imaging/elements.cc,
// and, for a field dtype, the proto DType value and STOKER_DTYPE_* macro
// (both checked against this table by tests and static_asserts).
#ifndef STOKER_SHM_DTYPES_H_
#define STOKER_SHM_DTYPES_H_

#include <cstddef>
#include <cstdint>

namespace stoker::shm {

enum class ElemClass : uint8_t { kBool, kUnsigned, kSigned, kFloat };

// X(id, ring code (0: not a field dtype), name, bytes, memoryview format,
//   class, numpy dtype name, torch dtype name).
// bfloat16 has no numpy type: numpy sees its raw 16-bit patterns (uint16),
// torch its values. float16 and bfloat16 views use "H" (memoryview cannot
// cast to 16-bit floats).
#define STOKER_ELEMENT_TYPES(X)                                                \
  X(Bool, 0, "bool", 1, "?", kBool, "bool", "bool")                            \
  X(Int8, 0, "int8", 1, "b", kSigned, "int8", "int8")                          \
  X(Uint8, 1, "uint8", 1, "B", kUnsigned, "uint8", "uint8")                    \
  X(Int16, 5, "int16", 2, "h", kSigned, "int16", "int16")                      \
  X(Uint16, 4, "uint16", 2, "H", kUnsigned, "uint16", "uint16")                \
  X(Int32, 6, "int32", 4, "i", kSigned, "int32", "int32")                      \
  X(Uint32, 0, "uint32", 4, "I", kUnsigned, "uint32", "uint32")                \
  X(Int64, 7, "int64", 8, "q", kSigned, "int64", "int64")                      \
  X(Uint64, 0, "uint64", 8, "Q", kUnsigned, "uint64", "uint64")                \
  X(Float16, 3, "float16", 2, "H", kFloat, "float16", "float16")               \
  X(Float32, 2, "float32", 4, "f", kFloat, "float32", "float32")               \
  X(Float64, 0, "float64", 8, "d", kFloat, "float64", "float64")               \
  X(Bfloat16, 8, "bfloat16", 2, "H", kFloat, "uint16", "bfloat16")

// Element types, in the table's order.
enum class ElemType : uint8_t {
#define STOKER_ELEM_ENUM(id, ring, name, bytes, format, cls, numpy, torch) k##id,
  STOKER_ELEMENT_TYPES(STOKER_ELEM_ENUM)
#undef STOKER_ELEM_ENUM
};

// Ring dtype codes (kDTypeFloat16 = 3, ...). A type no field has gets a
// value no ring code takes (0x100 + its row), so it never equals a field's
// dtype, nor an unset one.
enum DType : uint32_t {
#define STOKER_DTYPE_ENUM(id, ring, name, bytes, format, cls, numpy, torch) \
  kDType##id = (ring) != 0 ? (ring) : 0x100u + static_cast<uint32_t>(ElemType::k##id),
  STOKER_ELEMENT_TYPES(STOKER_DTYPE_ENUM)
#undef STOKER_DTYPE_ENUM
};

struct DTypeInfo {
  ElemType type;
  uint32_t code;  // Ring code; 0: not a field dtype.
  const char* name;
  uint32_t bytes;
  const char* format;
  ElemClass cls;
  const char* numpy;
  const char* torch;

  constexpr bool is_float() const { return cls == ElemClass::kFloat; }
  constexpr bool is_field() const { return code != 0; }
};

inline constexpr DTypeInfo kElemTypes[] = {
#define STOKER_ELEM_INFO(id, ring, name, bytes, format, cls, numpy, torch) \
  {ElemType::k##id, ring, name, bytes, format, ElemClass::cls, numpy, torch},
    STOKER_ELEMENT_TYPES(STOKER_ELEM_INFO)
#undef STOKER_ELEM_INFO
};

// The row of an element type.
inline constexpr const DTypeInfo& Elem(ElemType t) {
  return kElemTypes[static_cast<size_t>(t)];
}
inline constexpr int ElemBytes(ElemType t) { return static_cast<int>(Elem(t).bytes); }
inline constexpr const char* ElemName(ElemType t) { return Elem(t).name; }

// The row of a ring dtype code; null for 0 or an unknown code.
inline constexpr const DTypeInfo* FindDType(uint32_t code) {
  if (code == 0) return nullptr;
  for (const DTypeInfo& d : kElemTypes) {
    if (d.code == code) return &d;
  }
  return nullptr;
}

// Bytes per element of a ring dtype; 0 for an unknown code.
inline constexpr uint32_t DTypeBytes(uint32_t code) {
  const DTypeInfo* d = FindDType(code);
  return d == nullptr ? 0 : d->bytes;
}

// Whether a ring dtype is a float type (values are rounded into it).
inline constexpr bool DTypeIsFloat(uint32_t code) {
  const DTypeInfo* d = FindDType(code);
  return d != nullptr && d->is_float();
}

// The element type of a ring dtype code (uint8 for an unknown one; callers
// have checked the code).
inline constexpr ElemType FromRingDType(uint32_t code) {
  const DTypeInfo* d = FindDType(code);
  return d == nullptr ? ElemType::kUint8 : d->type;
}

// How many rows are field dtypes.
inline constexpr size_t FieldDTypeCount() {
  size_t n = 0;
  for (const DTypeInfo& d : kElemTypes) n += d.is_field() ? 1 : 0;
  return n;
}

}  // namespace stoker::shm

#endif  // STOKER_SHM_DTYPES_H_
