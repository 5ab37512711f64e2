#include "server/imaging/jpeg.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  bool warned = false;
  bool over_limit = false;  // The jump came from a limit, not from libjpeg.
  char message[JMSG_LENGTH_MAX] = {0};
};

// Stops a progressive file with more scans than allowed while libjpeg reads
// it (the scans of a progressive image are consumed in start_decompress).
struct ScanLimit {
  jpeg_progress_mgr pub;
  ErrorManager* err;
  int max_scans;
};

void OnProgress(j_common_ptr cinfo) {
  auto* limit = reinterpret_cast<ScanLimit*>(cinfo->progress);
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > limit->max_scans) {
    std::snprintf(limit->err->message, sizeof(limit->err->message),
                  "JPEG has more than %d scans (the progressive scan limit)",
                  limit->max_scans);
    limit->err->over_limit = true;
    longjmp(limit->err->jump, 1);
  }
}

// Bytes libjpeg needs for an image decoded at `eighths`/8: a whole-image
// coefficient buffer (16-bit coefficients of every block of every
// component) for progressive files, plus the output rows.
int64_t EstimatedBytes(const jpeg_decompress_struct& cinfo) {
  int64_t bytes = int64_t{cinfo.image_width} * cinfo.image_height * 3;
  if (cinfo.progressive_mode) {
    for (int c = 0; c < cinfo.num_components; ++c) {
      const jpeg_component_info& comp = cinfo.comp_info[c];
      const int64_t bw = (int64_t{cinfo.image_width} * comp.h_samp_factor +
                          cinfo.max_h_samp_factor * 8 - 1) /
                         (cinfo.max_h_samp_factor * 8);
      const int64_t bh = (int64_t{cinfo.image_height} * comp.v_samp_factor +
                          cinfo.max_v_samp_factor * 8 - 1) /
                         (cinfo.max_v_samp_factor * 8);
      bytes += bw * bh * 64 * 2;
    }
  }
  return bytes;
}

void OnError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (cinfo->err->msg_code == JERR_NO_SOI) {
    // libjpeg's text quotes the file's first bytes; errors reach logs and
    // other users' eyes, file contents never do.
    std::snprintf(err->message, sizeof(err->message), "no start-of-image marker");
  } else {
    (*cinfo->err->format_message)(cinfo, err->message);
  }
  longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // Trace messages.
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
  if (!err->warned) (*cinfo->err->format_message)(cinfo, err->message);
  err->warned = true;
}

// CMYK as libjpeg returns it to RGB. Adobe files store inverted values
// (255 = no ink), for which R = C*K/255; others the plain ones.
void CmykToRgb(const uint8_t* in, int n, bool inverted, uint8_t* out) {
  for (int i = 0; i < n; ++i, in += 4, out += 3) {
    int c = in[0], m = in[1], y = in[2], k = in[3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    out[0] = static_cast<uint8_t>((c * k + 127) / 255);
    out[1] = static_cast<uint8_t>((m * k + 127) / 255);
    out[2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  ScanLimit scans;
  std::vector<uint8_t> cmyk_row;
};

JpegDecoder::JpegDecoder() : state_(std::make_unique<State>()) {
  state_->cinfo.err = jpeg_std_error(&state_->err.pub);
  state_->err.pub.error_exit = OnError;
  state_->err.pub.emit_message = OnMessage;
  state_->scans.pub.progress_monitor = OnProgress;
  state_->scans.err = &state_->err;
  jpeg_create_decompress(&state_->cinfo);
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&state_->cinfo); }

absl::Status JpegDecoder::Decode(const uint8_t* data, size_t size,
                                 RgbImage* out) {
  DecodedRegion region;
  region.image = std::move(*out);
  absl::Status s =
      Decode(data, size, [](int, int) { return RegionRequest{}; }, &region);
  *out = std::move(region.image);
  return s;
}

absl::Status JpegDecoder::ReadInfo(const uint8_t* data, size_t size,
                                   JpegInfo* info) {
  absl::Status s = Decode(data, size, [&](int, int) {
    const jpeg_decompress_struct& c = state_->cinfo;
    info->width = static_cast<int>(c.image_width);
    info->height = static_cast<int>(c.image_height);
    info->components = c.num_components;
    info->cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
    info->progressive = c.progressive_mode;
    info->arithmetic = c.arith_code;
    info->ycc_or_gray = c.jpeg_color_space == JCS_YCbCr || c.jpeg_color_space == JCS_GRAYSCALE;
    for (int k = 1; k < c.num_components; ++k) {
      info->plain_chroma &= c.comp_info[k].h_samp_factor == 1 && c.comp_info[k].v_samp_factor == 1;
    }
    if (c.num_components > 1) {
      info->mcu_width = 8 * c.max_h_samp_factor;
      info->mcu_height = 8 * c.max_v_samp_factor;
    }
    return RegionRequest{0, {}, false};  // eighths 0: stop after the header.
  }, nullptr);
  return s;
}

namespace {
std::vector<std::vector<uint8_t>*>& ThreadScratch() {
  thread_local std::vector<std::vector<uint8_t>*> buffers;
  return buffers;
}
}  // namespace

void RegisterDecodeScratch(std::vector<uint8_t>* buffer) { ThreadScratch().push_back(buffer); }

void ForgetDecodeScratch(std::vector<uint8_t>* buffer) {
  std::vector<std::vector<uint8_t>*>& buffers = ThreadScratch();
  buffers.erase(std::remove(buffers.begin(), buffers.end(), buffer), buffers.end());
}

void TrimDecodeScratch() {
  for (std::vector<uint8_t>* b : ThreadScratch())
    if (static_cast<int64_t>(b->capacity()) > kKeptDecodeBytes) std::vector<uint8_t>().swap(*b);
}

absl::Status ReserveDecode(const DecodeLimits& limits, int64_t bytes,
                           std::shared_ptr<void>* token) {
  token->reset();
  if (bytes <= kKeptDecodeBytes) {
    TrimDecodeScratch();
    return absl::OkStatus();
  }
  if (!limits.reserve) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<void>> held = limits.reserve(bytes, false);
  if (held.ok() && *held == nullptr) {
    TrimDecodeScratch();
    held = limits.reserve(bytes, true);
  }
  if (!held.ok()) return held.status();
  *token = std::move(*held);
  return absl::OkStatus();
}

absl::Status JpegDecoder::Decode(
    const uint8_t* data, size_t size,
    const std::function<RegionRequest(int width, int height)>& plan,
    DecodedRegion* out) {
  if (size == 0) return absl::InvalidArgumentError("empty file");
  if (out != nullptr) out->reserved.reset();
  jpeg_decompress_struct& cinfo = state_->cinfo;
  // A fresh decompressor per image: libjpeg keeps the tables of earlier
  // images (by design, for abbreviated streams), and a damaged file lacking
  // its own would otherwise be decoded with them.
  jpeg_destroy_decompress(&cinfo);
  jpeg_create_decompress(&cinfo);
  ErrorManager& err = state_->err;
  err.warned = false;
  err.over_limit = false;
  state_->scans.max_scans = limits_.max_scans;
  cinfo.progress = &state_->scans.pub;
  cinfo.mem->max_memory_to_use = static_cast<long>(limits_.max_bytes);
  bool started = false;
  if (setjmp(err.jump)) {
    jpeg_abort_decompress(&cinfo);
    if (out != nullptr) out->reserved.reset();
    if (err.over_limit) return absl::ResourceExhaustedError(err.message);
    return absl::DataLossError(
        absl::StrCat(started ? "corrupt JPEG: " : "not a JPEG: ", err.message));
  }
  jpeg_mem_src(&cinfo, data, size);
  jpeg_read_header(&cinfo, TRUE);
  // Checked from the header, before libjpeg allocates for the image.
  const int64_t pixels = int64_t{cinfo.image_width} * cinfo.image_height;
  if (pixels > limits_.max_pixels) {
    jpeg_abort_decompress(&cinfo);
    return absl::ResourceExhaustedError(absl::StrCat(
        "JPEG is ", cinfo.image_width, "x", cinfo.image_height, " (", pixels,
        " pixels), over the limit of ", limits_.max_pixels));
  }
  if (const int64_t need = EstimatedBytes(cinfo); need > limits_.max_bytes) {
    jpeg_abort_decompress(&cinfo);
    return absl::ResourceExhaustedError(absl::StrCat(
        "JPEG ", cinfo.image_width, "x", cinfo.image_height,
        cinfo.progressive_mode ? " (progressive)" : "", " needs about ",
        need >> 20, " MiB to decode, over the limit of ",
        limits_.max_bytes >> 20, " MiB"));
  }
  const RegionRequest req = plan(static_cast<int>(cinfo.image_width),
                                 static_cast<int>(cinfo.image_height));
  if (req.eighths == 0) {  // The header was all the caller wanted.
    jpeg_abort_decompress(&cinfo);
    return absl::OkStatus();
  }
  // Charged before libjpeg allocates; the token lives in *out, not in this
  // frame, which libjpeg's errors leave by longjmp.
  if (absl::Status held = ReserveDecode(limits_, EstimatedBytes(cinfo), &out->reserved);
      !held.ok()) {
    jpeg_abort_decompress(&cinfo);
    return held;
  }
  const int eighths = req.eighths;
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK ||
                    cinfo.jpeg_color_space == JCS_YCCK;
  const bool inverted = cinfo.saw_Adobe_marker;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo.scale_num = static_cast<unsigned>(eighths < 1 ? 1 : eighths > 8 ? 8 : eighths);
  cinfo.scale_denom = 8;
  cinfo.dct_method = JDCT_ISLOW;
  started = true;
  jpeg_start_decompress(&cinfo);
  const int w = static_cast<int>(cinfo.output_width);
  const int h = static_cast<int>(cinfo.output_height);
  out->scaled_width = w;
  out->scaled_height = h;
  // Block smoothing (on by default) applies where coefficients remain
  // unsent; a complete progressive file ends with every one final (0).
  out->region_dependent = false;
  if (cinfo.progressive_mode && cinfo.do_block_smoothing && cinfo.coef_bits != nullptr) {
    for (int c = 0; c < cinfo.num_components && !out->region_dependent; ++c) {
      for (int k = 0; k < 10; ++k) out->region_dependent |= cinfo.coef_bits[c][k] != 0;
    }
  }
  // libjpeg's iMCU column width at this scale (jpeg_crop_scanline's).
  out->align = static_cast<int>(cinfo.min_DCT_scaled_size) *
               (cinfo.num_components == 1 ? 1 : cinfo.max_h_samp_factor);
  const PixelRect window = RegionWindow(req, w, h, out->align);
  const int x0 = window.x0, x1 = window.x1, y0 = window.y0, y1 = window.y1;
  JDIMENSION xoff = static_cast<JDIMENSION>(x0);
  JDIMENSION cw = static_cast<JDIMENSION>(x1 - x0);
  if (cw < static_cast<JDIMENSION>(w)) jpeg_crop_scanline(&cinfo, &xoff, &cw);
  if (static_cast<int>(xoff) != x0 || static_cast<int>(cw) != x1 - x0) {
    // A picture kept whole relies on the window being this one.
    jpeg_abort_decompress(&cinfo);
    return absl::InternalError(absl::StrCat("libjpeg cropped columns [", xoff, ", ",
                                            xoff + cw, ") for the planned [", x0, ", ", x1,
                                            ")"));
  }
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
  const int rows = y1 - y0;
  out->x = static_cast<int>(xoff);
  out->y = y0;
  out->image.width = static_cast<int>(cw);
  out->image.height = rows;
  out->image.pixels.resize(static_cast<size_t>(cw) * rows * 3);
  if (cmyk) state_->cmyk_row.resize(static_cast<size_t>(cw) * 4);
  for (int r = 0; r < rows; ++r) {
    uint8_t* dst = &out->image.pixels[static_cast<size_t>(r) * cw * 3];
    JSAMPROW row = cmyk ? state_->cmyk_row.data() : dst;
    if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
      jpeg_abort_decompress(&cinfo);
      return absl::DataLossError("corrupt JPEG: scanline could not be read");
    }
    if (cmyk) CmykToRgb(row, static_cast<int>(cw), inverted, dst);
  }
  // Rows below the region are never decoded.
  if (cinfo.output_scanline < cinfo.output_height) {
    jpeg_abort_decompress(&cinfo);
  } else {
    jpeg_finish_decompress(&cinfo);
  }
  if (err.warned) return absl::DataLossError(absl::StrCat("corrupt JPEG: ", err.message));
  return absl::OkStatus();
}

PixelRect RegionWindow(const RegionRequest& req, int w, int h, int align) {
  const PixelRect& need = req.need;
  PixelRect r{std::max(0, need.x0), std::max(0, need.y0), std::min(w, need.x1),
              std::min(h, need.y1)};
  if (!req.crop || r.x1 <= r.x0 || r.y1 <= r.y0) {
    r.x0 = 0;
    r.x1 = w;
    if (!req.crop || r.y1 <= r.y0) {
      r.y0 = 0;
      r.y1 = h;
    }
  }
  if (r.x1 - r.x0 < w && align > 1) r.x0 = r.x0 / align * align;
  return r;
}

JpegDecoder& ThreadLocalDecoder() {
  thread_local JpegDecoder decoder;
  return decoder;
}

}  // namespace stoker
