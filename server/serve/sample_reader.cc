#include "server/serve/sample_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/imaging/elements.h"
#include "server/dataset/array_source.h"
#include "shm/futex.h"
#include "util/status_macros.h"

namespace stoker {

ReaderCaches SampleReader::Charged(ReaderCaches caches, const Dataset& dataset) {
  if (caches.decode_room == nullptr) return caches;
  caches.decode_limits.reserve = [room = caches.decode_room, &dataset, owner = caches.owner](
                                     int64_t bytes,
                                     bool wait) -> absl::StatusOr<std::shared_ptr<void>> {
    const Cancellation* cancel = dataset.reads_cancel.get();
    if (!wait) return room->Wait(owner, static_cast<uint64_t>(bytes), absl::ZeroDuration(), cancel);
    return room->WaitNamed(owner, static_cast<uint64_t>(bytes), SampleFetcher::kReadRoomWait,
                           cancel, "its decode", "--max-decode-bytes-in-flight");
  };
  return caches;
}

SampleReader::SampleReader(const Dataset& dataset, const Pipeline& pipeline,
                           uint64_t seed, int max_side, std::vector<uint64_t> field_bytes,
                           ReaderCaches caches, PixelKeeper* keeper)
    : dataset_(dataset),
      pipeline_(pipeline),
      seed_(seed),
      max_side_(max_side),
      keeper_(keeper),
      field_bytes_(std::move(field_bytes)),
      caches_(Charged(std::move(caches), dataset)),
      decoded_key_prefix_(absl::StrCat(pipeline.fingerprint(), "|px", max_side)) {
  for (size_t f = 0; f < pipeline_.fields().size(); ++f) {
    if (pipeline_.fields()[f].spatial()) decoded_bytes_ += field_bytes_[f];
  }
  keeps_decoded_ = pipeline_.cacheable() && caches_.decoded != nullptr && decoded_bytes_ > 0 &&
                   dataset_.expected_samples() * decoded_bytes_ <= caches_.decoded->capacity_bytes();
  if (dataset_.source != nullptr && dataset_.source->arrays() != nullptr)
    rows_ = RowGather::For(*dataset_.source->arrays(), pipeline_, field_bytes_);
  // Finished samples kept: pictures would never be read again.
  if (keeps_decoded_ && keeper_ != nullptr) {
    keeper_->TurnOff("finished samples are kept (the decoded cache): nothing is decoded again");
  }
}

void SampleReader::Count(uint64_t t0, uint64_t n) const {
  const uint64_t ns = shm::MonotonicNanos() - t0;
  if (caches_.fetch_latency != nullptr) caches_.fetch_latency->Observe(ns, n);
  read_ns_.fetch_add(ns, std::memory_order_relaxed);
}

size_t SampleReader::ReadRows(const uint64_t* indices, size_t n, const SampleOut& out) const {
  if (rows_ == nullptr || n == 0) return 0;
  const uint64_t t0 = shm::MonotonicNanos();
  const size_t copied = rows_->Copy(indices, n, out.field);
  Count(t0, copied);
  return copied;
}

SampleReader::Result SampleReader::Read(uint64_t index, uint64_t epoch, const SampleOut& out,
                                        FetchedSample* in) const {
  Result r = ReadOnce(index, epoch, out, in);
  // A file replaced since the session proved it: identified afresh, once.
  if (r.kind == Result::kReadError && r.error.code() == absl::StatusCode::kAborted) {
    *in = FetchedSample();
    r = ReadOnce(index, epoch, out, in);
  }
  return r;
}

SampleReader::Result SampleReader::ReadOnce(uint64_t index, uint64_t epoch,
                                            const SampleOut& out, FetchedSample* in) const {
  if (dataset_.source->arrays() != nullptr) return ReadArrays(index, epoch, out);
  const Sample& sample = dataset_.sample(index);
  auto failed = [&](uint32_t k, const absl::Status& s) {
    return Result{Result::kReadError,
                  k == 0 ? s
                         : absl::Status(s.code(), absl::StrCat(sample.file(k), ": ", s.message()))};
  };
  // Each file is identified through the caller's confinement first: the
  // caches are keyed by what would be read, and served only to a caller
  // that may open it.
  std::vector<SourceKey> ids(pipeline_.files());
  for (uint32_t k = 0; k < pipeline_.files(); ++k) {
    absl::StatusOr<SourceKey> id = caches_.fetcher->Identify(dataset_, sample.file(k));
    if (!id.ok()) return failed(k, id.status());
    ids[k] = *std::move(id);
  }
  // A file the caller has not shown it may read (SourceKey::proven) is
  // read, never served from a cache of what it would decode to.
  const bool proven =
      std::all_of(ids.begin(), ids.end(), [](const SourceKey& id) { return id.proven; });
  if (pipeline_.cacheable() && caches_.decoded != nullptr) {
    in->decoded_key = decoded_key_prefix_;
    for (const SourceKey& id : ids) absl::StrAppend(&in->decoded_key, "|", id.key());
    if (Bytes done = proven ? caches_.decoded->Lookup(in->decoded_key) : nullptr) {
      CopySpatial(*done, out);
      return Result{Result::kDone, absl::OkStatus()};
    }
  }
  // Every picture kept: no file is read, unless a field carries one as is.
  if (proven && UsesPixels() && LookupPixels(ids, index, epoch, in) &&
      !pipeline_.has_encoded()) {
    return Result{Result::kDecode, absl::OkStatus()};
  }
  // The files' room among the bytes in flight, taken before any is read
  // and held until the decode stage drops the sample: what waits for
  // decoding is bounded as what is being read is.
  absl::StatusOr<std::shared_ptr<void>> room =
      caches_.fetcher->Charge(dataset_, caches_.owner, ids, sample.file(0));
  if (!room.ok()) return failed(0, room.status());
  in->held = *std::move(room);
  for (uint32_t k = 0; k < pipeline_.files(); ++k) {
    const uint64_t t0 = shm::MonotonicNanos();
    bool from_source = false;
    absl::StatusOr<Bytes> bytes = caches_.fetcher->Fetch(dataset_, sample.file(k), caches_.owner,
                                                         &from_source, &ids[k], true);
    Count(t0);
    if (from_source && dataset_.source->remote()) {
      remote_.Add(epoch, bytes.ok() ? (*bytes)->size() : 0);
    }
    if (!bytes.ok()) return failed(k, bytes.status());
    in->files.push_back(*std::move(bytes));
  }
  // Every file not proven was just read from its source by this session
  // itself (SampleFetcher::Fetch never serves such a key from a cache),
  // which proves it: its pictures are looked up now, and filled by the
  // decode stage on a miss, so a cold epoch keeps an object store's
  // pictures as it keeps a local folder's.
  if (!proven && UsesPixels()) {
    for (SourceKey& id : ids) id.proven = true;
    LookupPixels(ids, index, epoch, in);
  }
  return Result{Result::kDecode, absl::OkStatus()};
}

SampleReader::Result SampleReader::ReadArrays(uint64_t index, uint64_t epoch,
                                              const SampleOut& out) const {
  absl::Status s = CopyArrays(index, epoch, out);
  if (s.ok()) return Result{Result::kDone, s};
  return Result{s.code() == absl::StatusCode::kDataLoss ? Result::kDecodeError
                                                        : Result::kReadError,
                s};
}

absl::Status SampleReader::CopyArrays(uint64_t index, uint64_t epoch,
                                      const SampleOut& out) const {
  const ArraySource& src = *dataset_.source->arrays();
  STOKER_RETURN_IF_ERROR(src.Broken(index));
  const std::vector<uint64_t>& shape = src.shape(index);
  for (const FieldPlan& field : pipeline_.fields()) {
    if (field.kind != v1::FieldSpec::KIND_ARRAY) continue;
    absl::Status fits = pipeline_.CheckArrayShape(field, shape, "the sample");
    if (!fits.ok()) return absl::DataLossError(fits.message());
  }
  const uint64_t t0 = shm::MonotonicNanos();
  absl::StatusOr<Foreground> foreground;
  if (pipeline_.label_file() >= 0) {
    foreground = src.ForegroundOf(index, static_cast<uint32_t>(pipeline_.label_file()));
    if (!foreground.ok()) return foreground.status();
  }
  std::vector<Effects> effects;
  const std::vector<std::vector<uint64_t>> starts = pipeline_.PlanArrays(
      shape, seed_, epoch, index, &effects, foreground.ok() ? &*foreground : nullptr);
  for (size_t f = 0; f < pipeline_.fields().size(); ++f) {
    const FieldPlan& field = pipeline_.fields()[f];
    if (field.kind != v1::FieldSpec::KIND_ARRAY) continue;
    STOKER_RETURN_IF_ERROR(CopyArray(src, index, field, starts[f], effects[f], out.field[f]));
  }
  Count(t0);
  return absl::OkStatus();
}

absl::Status SampleReader::CopyArray(const ArraySource& src, uint64_t index,
                                     const FieldPlan& field, const std::vector<uint64_t>& start,
                                     const Effects& effects, uint8_t* dst) const {
  const std::vector<uint64_t> region = Pipeline::RegionOf(field, src.shape(index));
  const bool values = std::any_of(effects.begin(), effects.end(),
                                  [](const Effect& e) { return e.kind->values(); });
  if (!values) {
    STOKER_RETURN_IF_ERROR(src.ReadArray(index, field.file, start.data(), region.data(),
                                         FromRingDType(field.dtype), dst));
    Pipeline::ApplyArray(field, effects, dst);
    return absl::OkStatus();
  }
  // The value stage, on float32 (a float32 field's own bytes).
  uint64_t n = 1;
  for (uint64_t d : region) n *= d;
  thread_local std::vector<float> tmp;
  const bool narrow = field.dtype != shm::kDTypeFloat32;  // A 16-bit float field.
  if (narrow) tmp.resize(n);
  float* v = narrow ? tmp.data() : reinterpret_cast<float*>(dst);
  STOKER_RETURN_IF_ERROR(src.ReadArray(index, field.file, start.data(), region.data(),
                                       ElemType::kFloat32, reinterpret_cast<uint8_t*>(v)));
  for (const Effect& e : effects) {
    if (e.kind->values()) e.kind->ApplyValues(e, field, v, n);
  }
  if (narrow) StoreFloats(v, n, shm::FromRingDType(field.dtype), dst);
  for (const Effect& e : effects) {
    if (!e.kind->values()) e.kind->ApplyArray(e, field, dst);
  }
  return absl::OkStatus();
}

bool SampleReader::UsesPixels() const {
  return max_side_ > 0 || (keeper_ != nullptr && keeper_->automatic() && keeper_->Lookup());
}

bool SampleReader::LookupPixels(const std::vector<SourceKey>& ids, uint64_t index,
                                uint64_t epoch, FetchedSample* in) const {
  const uint64_t t0 = shm::MonotonicNanos();
  const std::vector<FieldPlan>& fields = pipeline_.fields();
  in->pictures.resize(fields.size());
  std::vector<Canvas> canvases;
  bool all = true;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (!fields[f].spatial()) continue;
    CachedPicture& pic = in->pictures[f];
    pic.file = ids[fields[f].file];
    const ImageRequest request = pipeline_.Request(fields[f], caches_.decode_limits);
    if (max_side_ > 0) {
      pic.key = PixelCache::Key(pic.file, max_side_, request);
      pic.entry = caches_.pixels->Lookup(*dataset_.source, pic.file, pic.key, &pic.versioned);
    } else {
      pic.entry = LookupExact(f, request, index, epoch, &canvases, &pic);
    }
    all = all && pic.entry != nullptr;
  }
  read_ns_.fetch_add(shm::MonotonicNanos() - t0, std::memory_order_relaxed);
  return all;
}

Bytes SampleReader::LookupExact(size_t f, const ImageRequest& request, uint64_t index,
                                uint64_t epoch, std::vector<Canvas>* canvases,
                                CachedPicture* pic) const {
  const FieldPlan& field = pipeline_.fields()[f];
  // Exact pictures are kept in RAM only: whole ones would crowd L2. A
  // session whose claim was revoked lets its pictures age out first.
  const bool refresh = keeper_ == nullptr || keeper_->Refreshes();
  auto lookup = [&](int eighths) {
    pic->key = PixelCache::Key(pic->file, 0, request, eighths);
    return caches_.pixels->Lookup(*dataset_.source, pic->file, pic->key, &pic->versioned,
                                  /*l2=*/false, refresh);
  };
  // Any scale kept tells the picture's size (a PNG's and JPEG's whole
  // scale first): looked at without counting, then the scale this sample
  // needs is looked up.
  const bool scales = pipeline_.scale_decode() && field.kind == v1::FieldSpec::KIND_IMAGE;
  Bytes kept;
  for (int eighths : {8, 4, 2, 1}) {
    kept = caches_.pixels->Peek(pic->file, PixelCache::Key(pic->file, 0, request, eighths));
    if (kept || !scales) break;
  }
  // None: a miss, counted once; unless the whole scale was filled meanwhile
  // (another epoch's read of this sample), which is then what was found:
  // it may not be the scale this sample needs.
  const bool counted = kept == nullptr;
  if (counted && (kept = lookup(8)) == nullptr) return nullptr;
  const KeptPicture k = KeptOf(kept);
  if (k.whole_only && pipeline_.crop_decode()) {
    pic->key = PixelCache::Key(pic->file, 0, request, k.eighths);
    pic->whole_only = true;
    return nullptr;
  }
  if (keeper_ != nullptr) keeper_->Found(kept->size() + pic->file.file.size());
  if (!k.scaled) return counted ? kept : lookup(k.eighths);
  // A JPEG: the scale this sample's crop decodes it at, its geometry drawn
  // as the renderer draws it.
  if (canvases->empty()) {
    *canvases = pipeline_.Plan(k.source_width, k.source_height, seed_, epoch, index);
  }
  const int eighths =
      pipeline_.Region(field, (*canvases)[f], k.source_width, k.source_height).eighths;
  pic->other_scale = eighths != k.eighths;
  if (counted && !pic->other_scale) return kept;
  return lookup(eighths);
}

absl::Status SampleReader::Picture(size_t f, const FetchedSample& in,
                                   const std::function<RegionRequest(int, int)>& plan,
                                   Image* image, Bytes* entry, ImageView* view) const {
  const FieldPlan& field = pipeline_.fields()[f];
  const ImageRequest request = pipeline_.Request(field, caches_.decode_limits);
  const bool looked = f < in.pictures.size() && !in.pictures[f].key.empty();
  if (looked && max_side_ > 0) {  // Bounded: the geometry at the kept size.
    const CachedPicture& pic = in.pictures[f];
    *entry = pic.entry;
    if (!*entry) {
      STOKER_ASSIGN_OR_RETURN(
          *entry,
          caches_.pixels->Fill(pic.key, in.files[field.file], request, max_side_, 8,
                               field.kind == v1::FieldSpec::KIND_MASK ? Filter::kNearest
                                                                      : Filter::kBilinear,
                               pic.versioned, pic.file.version, caches_.owner));
    }
    *view = PixelsOf(*entry);
    plan(view->width, view->height);
    return absl::OkStatus();
  }
  if (looked) {
    *entry = in.pictures[f].entry;
    if (!*entry && !in.pictures[f].whole_only) *entry = FillExact(f, in, request, plan);
  }
  if (looked && *entry) {
    // Exact: the source's size, and the part of the picture the decode
    // would give.
    const KeptPicture k = KeptOf(*entry);
    STOKER_ASSIGN_OR_RETURN(*view,
                            ExactView(*entry, plan(k.source_width, k.source_height), image));
    return absl::OkStatus();
  }
  const Bytes& bytes = in.files[field.file];
  STOKER_RETURN_IF_ERROR(DecodeImage(reinterpret_cast<const uint8_t*>(bytes->data()),
                                     bytes->size(), request, plan, image));
  *view = image->view();
  return absl::OkStatus();
}

Bytes SampleReader::FillExact(size_t f, const FetchedSample& in, const ImageRequest& request,
                              const std::function<RegionRequest(int, int)>& plan) const {
  if (keeper_ == nullptr || !keeper_->Wants()) return nullptr;
  const FieldPlan& field = pipeline_.fields()[f];
  const CachedPicture& pic = in.pictures[f];
  const Bytes& bytes = in.files[field.file];
  const uint8_t* data = reinterpret_cast<const uint8_t*>(bytes->data());
  int eighths = 8;
  if (SniffImageFormat(data, bytes->size()) == ImageFormat::kJpeg) {
    // Kept at the scale this crop decodes it at: its size from the header.
    JpegDecoder& decoder = ThreadLocalDecoder();
    decoder.set_limits(request.limits);
    JpegInfo info;
    if (!decoder.ReadInfo(data, bytes->size(), &info).ok()) return nullptr;
    eighths = std::clamp(plan(info.width, info.height).eighths, 1, 8);
  }
  absl::StatusOr<Bytes> filled = caches_.pixels->Fill(
      PixelCache::Key(pic.file, 0, request, eighths), bytes, request, /*max_side=*/0, eighths,
      Filter::kNearest, /*versioned=*/false, pic.file.version, caches_.owner,
      [&](uint64_t n) { return keeper_->Keep(n, pic.other_scale); });
  // A whole decode may fail where the session's own decode (rows above a
  // truncation) succeeds: that decode then decides, and nothing is kept.
  // One that stands only for itself serves no region decode.
  if (!filled.ok() || (KeptOf(*filled).whole_only && pipeline_.crop_decode())) return nullptr;
  return *std::move(filled);
}

void SampleReader::CopySpatial(const std::string& value, const SampleOut& out) const {
  const char* p = value.data();
  for (size_t f = 0; f < pipeline_.fields().size(); ++f) {
    if (!pipeline_.fields()[f].spatial()) continue;
    std::memcpy(out.field[f], p, field_bytes_[f]);
    p += field_bytes_[f];
  }
}

void SampleReader::KeepDecoded(const FetchedSample& in, std::shared_ptr<std::string> value,
                               const SampleOut& out) const {
  CopySpatial(*value, out);
  caches_.decoded->Insert(in.decoded_key, std::move(value));
}

}  // namespace stoker
