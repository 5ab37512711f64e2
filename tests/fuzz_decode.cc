// fuzz_decode: runs mutated real-photo files through the daemon's decode
// path (header limits, DCT-scaled region decode, crop, resample, the pixel
// cache's bounded decode, array reads) and counts the outcomes. Built with AddressSanitizer and UBSan by
// `make sanitize` (CI), where any memory error or undefined behaviour
// aborts with a report; without them it is a plain robustness run.
//
//   fuzz_decode --photos DIR [--mutations N] [--seed S] [--side PX]
//
// The photos (e.g. /usr/share/backgrounds/mate/nature, Debian's
// mate-backgrounds) are first reduced to about --side pixels and
// re-encoded baseline 4:2:0, 4:4:4, grayscale and progressive, and as PNG
// (RGB, gray, RGBA, palette, 16-bit gray), so the mutations stay fast to
// decode; the content stays photographic. Every file goes through the
// session's own decode path (by-content decoder + compiled pipeline): JPEGs
// through the val/train presets with each decode lever, PNGs through a
// custom pipeline (an image and a mask of the same file, joint random
// geometry); .npy and HDF5 files through the array sources; manifests
// through the file environment and their parser; and live sessions of an
// in-process daemon whose ring header is overwritten, every word, while the
// daemon fills the ring.
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5/serial/hdf5.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "server/dataset/array_source.h"
#include "server/daemon/daemon.h"
#include "server/sources/arrays/hdf5.h"
#include "server/sources/files/list.h"
#include "server/sources/arrays/npy.h"
#include "server/sources/arrays/npy_testing.h"
#include "tests/fuzz_nifti.h"
#include "server/imaging/decode.h"
#include "server/imaging/jpeg.h"
#include "server/pipeline/pipeline.h"
#include "server/cache/pixel_cache.h"
#include "server/daemon/ring_testing.h"
#include "server/imaging/transform.h"
#include "util/proto_json.h"
#include "tests/testdata.h"
#include "util/rng.h"
#include "shm/ring.h"

ABSL_FLAG(std::string, photos, "/usr/share/backgrounds/mate/nature",
          "Folder of real-photo JPEGs to mutate.");
ABSL_FLAG(int, mutations, 3000, "Mutated files to decode.");
ABSL_FLAG(uint64_t, seed, 1, "Mutation seed.");
ABSL_FLAG(int, side, 320, "Longest side the photos are reduced to first.");
ABSL_FLAG(int, manifest_mutations, 1000, "Mutated manifests to load.");
ABSL_FLAG(int, ring_scribbles, 20,
          "Live sessions whose ring header is overwritten while they run.");
ABSL_FLAG(int, nifti_mutations, 600, "Mutated NIfTI volumes to open and read.");
ABSL_FLAG(int, hdf5_mutations, 300,
          "Mutated HDF5 files opened and read: libhdf5 parses them in the "
          "sandboxed HDF5 reader, whose crashes are that file's error (counted "
          "and listed); any crash or sanitizer report in the daemon's code "
          "fails the run.");

namespace stoker {
namespace {

using Bytes = std::string;

// A reduced copy of `jpeg`, re-encoded four ways.
std::vector<Bytes> Variants(const Bytes& jpeg, int side) {
  JpegDecoder d;
  RgbImage full;
  if (!d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), &full)
           .ok()) {
    return {};
  }
  const double k = static_cast<double>(side) / std::max(full.width, full.height);
  const int w = std::max(16, static_cast<int>(full.width * k));
  const int h = std::max(16, static_cast<int>(full.height * k));
  std::vector<uint8_t> small(static_cast<size_t>(w) * h * 3);
  ResizeBox(full.pixels.data(), full.width, full.height,
            CropBox{0, 0, static_cast<double>(full.width),
                    static_cast<double>(full.height), false},
            w, h, small.data());
  std::vector<Bytes> out;
  using testdata::Subsampling;
  for (auto [sub, progressive] :
       {std::pair{Subsampling::k420, false}, std::pair{Subsampling::k444, false},
        std::pair{Subsampling::kGray, false}, std::pair{Subsampling::k420, true}}) {
    auto enc = testdata::EncodeJpeg(small, w, h, 85, sub, progressive);
    if (enc.ok()) out.push_back(*enc);
  }
  using testdata::PngKind;
  for (PngKind kind : {PngKind::kRgb8, PngKind::kGray8, PngKind::kRgba8,
                       PngKind::kPalette8, PngKind::kGray16}) {
    auto enc = testdata::EncodePng(small, w, h, kind);
    if (enc.ok()) out.push_back(*enc);
  }
  return out;
}

// Decodes a (mutated) file into the spatial fields of `p` with its random
// geometry, as a session's decode task does.
absl::Status RunPipeline(const Pipeline& p, const Bytes& bytes, uint64_t index) {
  std::vector<Canvas> canvases;
  int width = 0, height = 0;
  Image image;
  for (size_t f = 0; f < p.fields().size(); ++f) {
    const FieldPlan& field = p.fields()[f];
    if (!field.spatial()) continue;
    absl::Status s = DecodeImage(
        reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
        p.Request(field, DecodeLimits()),
        [&](int w, int h) {
          if (canvases.empty()) {
            width = w;
            height = h;
            canvases = p.Plan(w, h, 1, 0, index);
          }
          return p.Region(field, canvases[f], w, h);
        },
        &image);
    if (!s.ok()) return s;
    std::vector<uint8_t> out(field.height * field.width * field.channels);
    p.Write(field, canvases[f], image.view(), width, height, out.data());
  }
  return absl::OkStatus();
}

// One mutation of `in`, chosen by `rng`; its kind is named in `kind`.
Bytes Mutate(const Bytes& in, Rng& rng, std::string* kind) {
  Bytes b = in;
  const size_t n = b.size();
  auto at = [&](size_t lo) { return lo + rng.Next() % (n - lo); };
  switch (rng.Next() % 7) {
    case 0: {  // Flip bits anywhere.
      *kind = "bitflips";
      for (int k = 1 + rng.Next() % 8; k > 0; --k) b[at(2)] ^= 1 << (rng.Next() % 8);
      break;
    }
    case 1: {  // Overwrite header bytes (first 1 KiB: tables, frame, scan).
      *kind = "header";
      for (int k = 1 + rng.Next() % 4; k > 0; --k) {
        b[2 + rng.Next() % std::min<size_t>(n - 2, 1024)] =
            static_cast<char>(rng.Next());
      }
      break;
    }
    case 2:  // Truncate.
      *kind = "truncate";
      b.resize(at(2));
      break;
    case 3: {  // Claim a huge or odd size in the frame header.
      *kind = "size";
      for (size_t i = 2; i + 8 < n; ++i) {
        const uint8_t m = static_cast<uint8_t>(b[i + 1]);
        if (static_cast<uint8_t>(b[i]) == 0xFF && (m == 0xC0 || m == 0xC2)) {
          const uint16_t v[] = {0, 1, 7, 16384, 65535};
          const uint16_t hh = v[rng.Next() % 5], ww = v[rng.Next() % 5];
          b[i + 5] = static_cast<char>(hh >> 8);
          b[i + 6] = static_cast<char>(hh);
          b[i + 7] = static_cast<char>(ww >> 8);
          b[i + 8] = static_cast<char>(ww);
          break;
        }
      }
      break;
    }
    case 4: {  // Duplicate a stretch (repeated segments and scans).
      *kind = "duplicate";
      const size_t from = at(2), len = std::min<size_t>(n - from, 1 + rng.Next() % 4096);
      const Bytes piece = b.substr(from, len);
      for (int k = 1 + rng.Next() % 20; k > 0; --k) b.insert(from, piece);
      break;
    }
    case 5: {  // Insert random bytes.
      *kind = "insert";
      Bytes junk(1 + rng.Next() % 64, '\0');
      for (char& c : junk) c = static_cast<char>(rng.Next());
      b.insert(at(2), junk);
      break;
    }
    default: {  // Turn a marker into another one (e.g. DQT into APPn).
      *kind = "marker";
      for (int tries = 0; tries < 64; ++tries) {
        const size_t i = at(2);
        if (static_cast<uint8_t>(b[i - 1]) == 0xFF && static_cast<uint8_t>(b[i]) >= 0xC0) {
          b[i] = static_cast<char>(0xC0 + rng.Next() % 0x3F);
          break;
        }
      }
      break;
    }
  }
  return b;
}

// A mutated .npy of the photo's pixels: header parse, then a region read
// of what the header claims (the parse must have bounded it by the data).
absl::Status RunNpy(const Bytes& bytes, Rng& rng) {
  absl::StatusOr<NpyHeader> h =
      ParseNpyHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!h.ok()) return h.status();
  std::vector<uint64_t> start(h->shape.size()), count(h->shape.size());
  uint64_t n = 1;
  for (size_t d = 0; d < h->shape.size(); ++d) {
    if (h->shape[d] == 0) return absl::OkStatus();
    start[d] = rng.Below(h->shape[d]);
    count[d] = 1 + rng.Below(std::min<uint64_t>(h->shape[d] - start[d], 64));
    n *= count[d];
  }
  std::vector<uint8_t> out(n * 4);
  CopyRegion(reinterpret_cast<const uint8_t*>(bytes.data()) + h->data_offset,
             h->type, h->shape, start.data(), count.data(), out.data(),
             ElemType::kFloat32);
  return absl::OkStatus();
}

// An HDF5 file of the photo's pixels: dataset "c" contiguous (read through
// a mapping), "z" chunked and deflated (inflated by the daemon).
Bytes Hdf5Of(const RgbImage& px, const std::string& path) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[3] = {static_cast<hsize_t>(px.height),
                           static_cast<hsize_t>(px.width), 3};
  const hsize_t chunk[3] = {16, 16, 3};
  const hid_t space = H5Screate_simple(3, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 3, chunk);
  H5Pset_deflate(dcpl, 6);
  for (const char* name : {"c", "z"}) {
    const hid_t set = H5Dcreate2(file, name, H5T_NATIVE_UINT8, space, H5P_DEFAULT,
                                 name[0] == 'z' ? dcpl : H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(set, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, px.pixels.data());
    H5Dclose(set);
  }
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Opens mutated HDF5 files as array sources and reads a region of their
// first sample, in this process: libhdf5 parses them in the HDF5 reader
// (server/h5probe), so a crash there is that file's error, counted here by
// how the reader ended; a crash or sanitizer report in this process fails
// the run.
void RunHdf5(const std::vector<Bytes>& bases, Rng& rng, int n,
             const std::string& dir, std::map<std::string, int>* outcomes) {
  const std::string path = dir + "/m.h5";
  for (int m = 0; m < n; ++m) {
    std::string kind;
    const Bytes bad = Mutate(bases[rng.Next() % bases.size()], rng, &kind);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    const char* set = m % 2 ? "z" : "c";
    // Half the runs read chunked datasets whole (RAM granted), half per sample.
    const ChargeRam charge =
        m % 4 < 2 ? ChargeRam()
                  : ChargeRam([](uint64_t) { return std::shared_ptr<void>(std::make_shared<int>(0)); });
    absl::StatusOr<std::shared_ptr<const ArraySource>> src =
        OpenHdf5Source(path, set, "", charge, nullptr);
    absl::Status s = src.status();
    if (src.ok() && (*src)->size() > 0 && (*src)->Broken(0).ok() &&
        (*src)->shape(0).size() == 2) {
      const std::vector<uint64_t>& shape = (*src)->shape(0);
      const uint64_t start[2] = {0, 0};
      const uint64_t count[2] = {std::min<uint64_t>(shape[0], 8), shape[1]};
      std::vector<uint8_t> out(count[0] * count[1] * 4);
      s = (*src)->Read(0, start, count, ElemType::kFloat32, out.data());
    }
    std::string how = s.ok() ? "OK" : "ERROR";
    const size_t lost = s.message().find("the HDF5 reader failed on it (");
    if (lost != std::string::npos) {  // How the reader ended, not the file's name.
      const size_t semi = s.message().rfind("; ");
      how = absl::StrCat("ERROR, reader lost: ", s.message().substr(semi + 2));
      how.pop_back();  // ")"
    }
    ++(*outcomes)[absl::StrCat("hdf5 ", kind, " ", how)];
  }
}

// Mutated manifests through the file environment and the parser: every
// outcome is a status; a manifest that parses has sane samples.
int RunManifests(Rng& rng, int n, const std::string& dir,
                 std::map<std::string, int>* outcomes) {
  const Bytes base =
      "# a comment\nclass_a/img_001.jpg\t0\nclass_b/img 2.JPEG\t1\n\n"
      "deep/er/img_3.png\t41\nclass_a/img_004.jpg\t2147483647\n";
  const Bytes pairs = "img/a.jpg\tmask/a.png\t1\nimg/b.jpg\tmask/b.png\t0\n";
  ScanLimits limits;
  limits.max_files = 64;
  limits.max_line_bytes = 512;
  limits.max_file_bytes = 1 << 16;
  const std::string path = dir + "/m.tsv";
  for (int i = 0; i < n; ++i) {
    std::string kind;
    const Bytes bad = Mutate(i % 2 ? base : pairs, rng, &kind);
    if (!testdata::WriteFile(path, bad).ok()) return 2;
    absl::StatusOr<Dataset> ds = LoadListDataset(path, dir, limits);
    if (ds.ok()) {
      for (const Sample& s : ds->samples) {
        if (s.path.empty() || s.label < 0 || s.more.size() + 1 > kMaxFilesPerSample) {
          std::fprintf(stderr, "fuzz_decode: manifest gave a bad sample\n");
          return 1;
        }
      }
    }
    ++(*outcomes)[absl::StrCat("manifest ", kind, " ",
                               absl::StatusCodeToString(ds.status().code()))];
  }
  return 0;
}

// A live session whose ring header a client scribbles on, every word,
// while the daemon fills it: the daemon keeps its own layout (sanitizers
// catch any read through the scribbled one), and closes and stops cleanly.
int RunRingScribbles(Rng& rng, int rounds, const std::string& dir,
                     std::map<std::string, int>* outcomes) {
  testdata::FolderSpec fs;
  fs.classes = 2;
  fs.per_class = 6;
  fs.min_side = 40;
  fs.max_side = 80;
  if (!testdata::MakeFolderDataset(dir + "/ds", fs).ok()) return 2;
  DaemonOptions o;
  o.decode_threads = 2;
  o.reader_threads = 4;
  o.shm_prefix = absl::StrCat("stoker-fuzz", getpid(), ".");
  Daemon daemon(o);
  if (!daemon.Start().ok()) return 2;
  v1::OpenSessionRequest r;
  r.mutable_spec()->mutable_dataset()->mutable_folder()->set_path(dir + "/ds");
  r.mutable_spec()->set_batch_size(3);
  r.mutable_spec()->set_image_size(24);
  r.mutable_spec()->set_ring_slots(3);
  for (int round = 0; round < rounds; ++round) {
    r.mutable_spec()->set_transform(round % 2 ? v1::TRANSFORM_TRAIN : v1::TRANSFORM_VAL);
    absl::StatusOr<v1::OpenSessionResponse> opened = daemon.OpenSession(r);
    if (!opened.ok()) return 2;
    auto ring = TakeRing(daemon, *opened);
    if (!ring.ok()) return 2;
    auto* words = static_cast<uint64_t*>((*ring)->base());
    const size_t nwords = sizeof(shm::RingHeader) / 8;
    for (size_t w = 0; w < nwords; ++w) words[w] = rng.Next() >> (rng.Next() % 64);
    // The producer goes on through the scribbled header: slots are freed
    // (as a consumer would) until it has published 12 more batches.
    auto published = [&] {
      for (const v1::SessionStats& st : daemon.ListSessions()) {
        if (st.session_id() == opened->session_id()) return st.batches_published();
      }
      return uint64_t{0};
    };
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (published() < 12 && absl::Now() < deadline) {
      for (uint32_t i = 0; i < (*ring)->layout().slot_count; ++i) {
        (*ring)->Slot(static_cast<int>(i)).control->state.store(shm::kSlotFree);
      }
      words[rng.Next() % nwords] = rng.Next();
      absl::SleepFor(absl::Milliseconds(1));
    }
    if (published() < 12) {
      std::fprintf(stderr, "fuzz_decode: the scribbled session stopped producing\n");
      return 1;
    }
    const absl::Status closed = daemon.CloseSession(opened->session_id());
    ++(*outcomes)[absl::StrCat("ring scribble ", absl::StatusCodeToString(closed.code()))];
  }
  daemon.Stop();
  return 0;
}

int Run() {
  std::vector<Bytes> bases, npys, h5s;
  std::vector<uint8_t> gray;
  int gray_width = 0, gray_height = 0;
  const std::string h5dir = testdata::MakeTempDir("fuzz-h5");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(absl::GetFlag(FLAGS_photos), ec)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".jpg" && ext != ".jpeg" && ext != ".JPG") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    for (Bytes& v : Variants(ss.str(), absl::GetFlag(FLAGS_side))) bases.push_back(v);
    // The photo's pixels as .npy arrays (uint8 HWC and float32).
    JpegDecoder d;
    RgbImage px;
    const std::string jpeg = ss.str();
    if (d.Decode(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), &px).ok()) {
      const std::vector<uint64_t> shape{static_cast<uint64_t>(px.height),
                                        static_cast<uint64_t>(px.width), 3};
      npys.push_back(NpyBytes(ElemType::kUint8, shape, px.pixels.data()));
      std::vector<float> f(px.pixels.begin(), px.pixels.begin() + 3 * px.width * 16);
      npys.push_back(NpyBytes(ElemType::kFloat32, {16, static_cast<uint64_t>(px.width), 3},
                              f.data()));
      if (gray.empty()) {  // One photo's luma for the NIfTI volumes.
        gray_width = std::min(px.width, 96);
        gray_height = std::min(px.height, 96);
        for (int y = 0; y < gray_height; ++y)
          for (int x = 0; x < gray_width; ++x) gray.push_back(px.pixels[(y * px.width + x) * 3 + 1]);
      }
      if (h5s.size() < 2) {  // Two photos are plenty for the slower HDF5 run.
        RgbImage small = px;
        small.height = std::min(px.height, 64);
        small.pixels.resize(static_cast<size_t>(small.height) * px.width * 3);
        h5s.push_back(Hdf5Of(small, h5dir + "/base.h5"));
      }
    }
  }
  if (bases.empty()) {
    std::fprintf(stderr, "fuzz_decode: no JPEG photos in %s\n",
                 absl::GetFlag(FLAGS_photos).c_str());
    return 2;
  }
  v1::SessionSpec spec;
  absl::Status parsed = JsonToProto(R"({"fields": [
      {"name": "image", "kind": "image", "shape": [40, 48, 3]},
      {"name": "mask", "kind": "mask", "shape": [40, 48]}], "pipeline": [
      {"random_resized_crop": {"width": 56, "height": 44, "interpolation": "bicubic"}},
      {"flip": {}}, {"random_crop": {"width": 48, "height": 40}}]})", &spec);
  absl::StatusOr<Pipeline> png_pipeline = Pipeline::Compile(spec);
  if (!parsed.ok() || !png_pipeline.ok()) {
    std::fprintf(stderr, "fuzz_decode: bad pipeline: %s\n",
                 png_pipeline.status().ToString().c_str());
    return 2;
  }
  // JPEGs go through the presets as sessions run them, every decode lever.
  std::vector<Pipeline> presets;
  for (v1::Transform t : {v1::TRANSFORM_TRAIN, v1::TRANSFORM_VAL}) {
    for (v1::Decode d : {v1::DECODE_SCALE_CROP, v1::DECODE_CROP, v1::DECODE_FULL}) {
      v1::SessionSpec preset;
      preset.set_transform(t);
      preset.set_image_size(t == v1::TRANSFORM_TRAIN ? 64 : 96);
      preset.set_batch_size(1);
      preset.set_decode(d);
      presets.push_back(*Pipeline::Compile(preset));
    }
  }
  // One thread's decoder for every file: no state may carry over.
  Rng rng(absl::GetFlag(FLAGS_seed));
  std::map<std::string, int> outcomes;
  const int total = absl::GetFlag(FLAGS_mutations);
  for (int m = 0; m < total; ++m) {
    std::string kind;
    if (m % 8 == 7 && !npys.empty()) {  // One in eight: a .npy.
      const Bytes bad = Mutate(npys[rng.Next() % npys.size()], rng, &kind);
      absl::Status s = RunNpy(bad, rng);
      ++outcomes[absl::StrCat("npy ", kind, " ", absl::StatusCodeToString(s.code()))];
      continue;
    }
    const Bytes& base = bases[rng.Next() % bases.size()];
    const Bytes bad = Mutate(base, rng, &kind);
    if (m % 8 == 5) {  // One in eight: the header read client decode routes by.
      JpegInfo info;
      absl::Status s = ThreadLocalDecoder().ReadInfo(
          reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), &info);
      if (s.ok() && (info.width < 1 || info.height < 1 || info.components < 1)) {
        std::fprintf(stderr, "fuzz_decode: header read %dx%d, %d components\n", info.width,
                     info.height, info.components);
        return 1;
      }
      ++outcomes[absl::StrCat("jpeg info ", kind, " ", absl::StatusCodeToString(s.code()))];
      continue;
    }
    if (m % 8 == 3) {  // One in eight: the pixel cache's bounded decode.
      ImageRequest request;
      request.channels = m % 16 == 3 ? 1 : 3;
      const int side = 16 + static_cast<int>(rng.Next() % 300);
      auto entry =
          DecodeBounded(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), request,
                        side, Filter::kBilinear);
      if (entry.ok()) {
        const ImageView v = PixelsOf(*entry);
        if (std::max(v.width, v.height) > side || v.width < 1 || v.height < 1) {
          std::fprintf(stderr, "fuzz_decode: bounded picture %dx%d over %d\n", v.width,
                       v.height, side);
          return 1;
        }
      }
      ++outcomes[absl::StrCat("bounded ", kind, " ",
                              absl::StatusCodeToString(entry.status().code()))];
      continue;
    }
    if (SniffImageFormat(reinterpret_cast<const uint8_t*>(base.data()),
                         base.size()) == ImageFormat::kPng) {
      absl::Status s = RunPipeline(*png_pipeline, bad, m);
      ++outcomes[absl::StrCat("png ", kind, " ", absl::StatusCodeToString(s.code()))];
      continue;
    }
    absl::Status s = RunPipeline(presets[m % presets.size()], bad, m);
    ++outcomes[absl::StrCat(kind, " ", absl::StatusCodeToString(s.code()))];
  }
  if (!h5s.empty()) {
    RunHdf5(h5s, rng, absl::GetFlag(FLAGS_hdf5_mutations), h5dir, &outcomes);
  }
  if (int rc = RunManifests(rng, absl::GetFlag(FLAGS_manifest_mutations), h5dir, &outcomes))
    return rc;
  if (int rc = gray.empty() ? 0
                            : RunNifti(gray, gray_width, gray_height, Mutate, rng,
                                       absl::GetFlag(FLAGS_nifti_mutations), h5dir, &outcomes))
    return rc;
  if (int rc = RunRingScribbles(rng, absl::GetFlag(FLAGS_ring_scribbles), h5dir, &outcomes))
    return rc;
  std::filesystem::remove_all(h5dir, ec);
  std::printf("fuzz_decode: %d mutations of %zu photo encodings, %d of HDF5 files, "
              "%d of NIfTI volumes, %d of manifests, %d scribbled ring headers\n",
              total, bases.size(), absl::GetFlag(FLAGS_hdf5_mutations),
              absl::GetFlag(FLAGS_nifti_mutations),
              absl::GetFlag(FLAGS_manifest_mutations), absl::GetFlag(FLAGS_ring_scribbles));
  for (const auto& [what, count] : outcomes) {
    std::printf("  %-32s %d\n", what.c_str(), count);
  }
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return stoker::Run();
}
