#include "server/pipeline/pipeline.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "util/proto_json.h"
#include "util/rng.h"

namespace stoker {
namespace {

v1::SessionSpec Preset(v1::Transform t, uint32_t size) {
  v1::SessionSpec s;
  s.set_transform(t);
  s.set_image_size(size);
  s.set_batch_size(4);
  return s;
}

v1::SessionSpec Custom(const std::string& json) {
  v1::SessionSpec s;
  EXPECT_TRUE(JsonToProto(json, &s).ok()) << json;
  return s;
}

// The presets are ops now; their geometry must be exactly the boxes the
// classic transforms computed (bit-identical batches depend on it).
TEST(PipelineTest, PresetsReproduceTheClassicBoxes) {
  auto val = Pipeline::Compile(Preset(v1::TRANSFORM_VAL, 224));
  auto train = Pipeline::Compile(Preset(v1::TRANSFORM_TRAIN, 224));
  ASSERT_TRUE(val.ok() && train.ok());
  EXPECT_TRUE(val->deterministic());
  EXPECT_FALSE(train->deterministic());
  const int sizes[][2] = {{500, 375}, {375, 500}, {224, 224}, {1024, 683},
                          {97, 1200}, {3000, 40}, {257, 256}};
  for (const auto& wh : sizes) {
    const CropBox want = CenterCropBox(wh[0], wh[1], 224);
    const Canvas got = val->Plan(wh[0], wh[1], 1, 0, 0)[0];
    ASSERT_TRUE(got.Full());
    EXPECT_EQ(got.src.x, want.x) << wh[0] << "x" << wh[1];
    EXPECT_EQ(got.src.y, want.y);
    EXPECT_EQ(got.src.w, want.w);
    EXPECT_EQ(got.src.h, want.h);
    for (uint64_t index = 0; index < 50; ++index) {
      Rng rng(MixSeed({7, 3, index}));
      const CropBox r = RandomResizedCropBox(wh[0], wh[1], rng);
      const Canvas c = train->Plan(wh[0], wh[1], 7, 3, index)[0];
      EXPECT_EQ(c.src.x, r.x);
      EXPECT_EQ(c.src.y, r.y);
      EXPECT_EQ(c.src.w, r.w);
      EXPECT_EQ(c.src.h, r.h);
      EXPECT_EQ(c.src.flip, r.flip);
      EXPECT_EQ(c.w, 224);
    }
  }
  // Fields: image then label, in the ring's codes.
  ASSERT_EQ(val->fields().size(), 2u);
  EXPECT_EQ(val->fields()[0].shape, (std::vector<uint64_t>{224, 224, 3}));
  EXPECT_EQ(val->fields()[1].dtype, shm::kDTypeInt32);
}

TEST(PipelineTest, BadSpecsNameTheOpAndField) {
  const std::string fields =
      R"("fields": [{"name": "image", "kind": "image", "shape": [32, 32, 3]},
                    {"name": "mask", "kind": "mask", "shape": [32, 32], "file": 1},
                    {"name": "label", "kind": "label", "dtype": "int64"}])";
  struct Case {
    std::string json;
    std::string words;
  } cases[] = {
      {"{" + fields + R"(, "pipeline": [{"random_crop": {"width": 32, "height": 32},
          "fields": ["depth"]}]})", "pipeline[0] (random_crop): no field named 'depth'"},
      {"{" + fields + R"(, "pipeline": [{"random_crop": {"width": 32, "height": 32}},
          {"normalize": {"mean": [0.5], "std": [0.5]}, "fields": ["mask"]}]})",
       "pipeline[1] (normalize): field 'mask' is a mask of uint8; normalize applies to float32/float16/bfloat16 images"},
      {"{" + fields + R"(, "pipeline": [{"random_crop": {"width": 48, "height": 32}}]})",
       "field 'image' is 32x32 (height x width) but the pipeline makes it 32x48"},
      {"{" + fields + R"(, "pipeline": [{"resize": {"size": 32}}]})",
       "field 'image': the pipeline leaves its size data-dependent"},
      {"{" + fields + R"(, "pipeline": [{"random_resized_crop": {"width": 32,
          "height": 32, "scale_min": 0.5, "scale_max": 2}}]})",
       "pipeline[0] (random_resized_crop): scale must satisfy"},
      {"{" + fields + R"(, "pipeline": [{}]})", "pipeline[0] (none): no op given"},
      {"{" + fields + R"(, "pipeline": [{"flip": {"probability": 1.5}}]})",
       "pipeline[0] (flip): probability must be in 0..1"},
      {R"({"fields": [{"name": "mask", "kind": "mask", "dtype": "float32",
          "shape": [8, 8]}], "pipeline": [{"center_crop": {"width": 8, "height": 8}}]})",
       "field 'mask' (mask): dtype float32 not allowed; masks are uint8 or uint16"},
      {R"({"fields": [{"name": "image", "kind": "image", "shape": [8, 8, 2]}]})",
       "2 channels; images have 1, 3 or 4"},
      {R"({"fields": [{"name": "x", "shape": [8]}]})",
       "field 'x' (unspecified): kind must be one of image, mask, label"},
      {R"({"fields": [{"name": "label", "kind": "label", "dtype": "float32"}]})",
       "labels are int32 or int64"},
      {R"({"transform": "val", "image_size": 8, "fields": [{"name": "label",
          "kind": "label"}]})", "leave transform, image_size"},
      {R"({"transform": "val", "image_size": 8, "pipeline": [{"flip": {}}]})",
       "pipeline needs fields"},
  };
  for (const Case& c : cases) {
    auto p = Pipeline::Compile(Custom(c.json));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_NE(p.status().message().find(c.words), std::string::npos)
        << p.status().message() << "\n  wanted: " << c.words;
  }
  auto ok = Pipeline::Compile(Custom("{" + fields + R"(, "pipeline": [
      {"random_crop": {"width": 32, "height": 32}}, {"flip": {}}]})"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->files(), 2u);
}

// An image and a mask made from it by a threshold: after any random
// geometry (nearest resampling for both) the mask still is the threshold of
// the transformed image, pixel for pixel, padding included.
// The decoded cache's key: a client's unknown fields change nothing the
// daemon does, so they change no key; the decode mode and every known
// field and op do, and a field's bytes never run into an op's.
TEST(PipelineTest, FingerprintIsCanonical) {
  const std::string json = R"({"fields": [
      {"name": "image", "kind": "image", "shape": [24, 40, 1]}],
      "pipeline": [{"random_crop": {"width": 40, "height": 24}}]})";
  auto base = Pipeline::Compile(Custom(json));
  ASSERT_TRUE(base.ok()) << base.status();
  v1::SessionSpec unknown = Custom(json);
  unknown.mutable_fields(0)->GetReflection()->MutableUnknownFields(unknown.mutable_fields(0))
      ->AddVarint(9999, 7);
  unknown.mutable_pipeline(0)->GetReflection()->MutableUnknownFields(unknown.mutable_pipeline(0))
      ->AddLengthDelimited(9998, "anything");
  auto with_unknown = Pipeline::Compile(unknown);
  ASSERT_TRUE(with_unknown.ok()) << with_unknown.status();
  EXPECT_EQ(with_unknown->fingerprint(), base->fingerprint());
  v1::SessionSpec full = Custom(json);
  full.set_decode(v1::DECODE_FULL);
  EXPECT_NE(Pipeline::Compile(full)->fingerprint(), base->fingerprint());
  v1::SessionSpec other = Custom(json);
  other.mutable_pipeline(0)->mutable_random_crop()->set_width(39);
  other.mutable_fields(0)->set_shape(1, 39);
  auto changed = Pipeline::Compile(other);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE(changed->fingerprint(), base->fingerprint());
  // Each part is tagged and length-prefixed.
  EXPECT_NE(base->fingerprint().find("5:field"), std::string::npos);
  EXPECT_NE(base->fingerprint().find("2:op"), std::string::npos);
}

TEST(PipelineTest, RandomGeometryIsAppliedJointly) {
  auto p = Pipeline::Compile(Custom(R"({"fields": [
      {"name": "image", "kind": "image", "shape": [24, 40, 1]},
      {"name": "mask", "kind": "mask", "shape": [24, 40], "pad_value": 0}],
      "pipeline": [
      {"random_resized_crop": {"width": 36, "height": 30, "interpolation": "nearest"}},
      {"flip": {}}, {"flip": {"vertical": true}},
      {"random_crop": {"width": 40, "height": 24}}]})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const int w = 97, h = 61;
  Image image, mask;
  for (Image* im : {&image, &mask}) {
    im->width = im->scaled_width = w;
    im->height = im->scaled_height = h;
    im->channels = 1;
    im->pixels.resize(w * h);
  }
  Rng fill(5);
  for (int i = 0; i < w * h; ++i) {
    image.pixels[i] = static_cast<uint8_t>(1 + fill.Below(255));  // Never 0.
    mask.pixels[i] = image.pixels[i] > 128;
  }
  int flips = 0, padded = 0;
  for (uint64_t index = 0; index < 200; ++index) {
    const std::vector<Canvas> c = p->Plan(w, h, 11, 0, index);
    flips += c[0].src.flip;
    std::vector<uint8_t> out_image(24 * 40), out_mask(24 * 40);
    p->Write(p->fields()[0], c[0], image.view(), w, h, out_image.data());
    p->Write(p->fields()[1], c[1], mask.view(), w, h, out_mask.data());
    for (int i = 0; i < 24 * 40; ++i) {
      // Padding: 0 in both (the image's fill, the mask's pad_value).
      padded += out_image[i] == 0;
      ASSERT_EQ(out_mask[i], out_image[i] > 128) << "sample " << index << " px " << i;
    }
  }
  EXPECT_GT(flips, 50);    // The draws vary...
  EXPECT_LT(flips, 150);
  EXPECT_GT(padded, 0);    // ...and the crop ran past the 36 wide box.
}

TEST(PipelineTest, LetterboxCentersAndPads) {
  auto p = Pipeline::Compile(Custom(R"({"fields": [
      {"name": "image", "kind": "image", "shape": [64, 64, 3]}],
      "pipeline": [{"resize": {"mode": "letterbox", "size": 64, "fill": 7}}]})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const Canvas c = p->Plan(200, 100, 0, 0, 0)[0];
  EXPECT_EQ(c.w, 64);
  EXPECT_EQ(c.h, 64);
  EXPECT_EQ(c.cx, 0);
  EXPECT_EQ(c.cy, 16);
  EXPECT_EQ(c.cw, 64);
  EXPECT_EQ(c.ch, 32);
  Image img;
  img.width = img.scaled_width = 200;
  img.height = img.scaled_height = 100;
  img.channels = 3;
  img.pixels.assign(200 * 100 * 3, 200);
  std::vector<uint8_t> out(64 * 64 * 3);
  p->Write(p->fields()[0], c, img.view(), 200, 100, out.data());
  for (int y = 0; y < 64; ++y) {
    const uint8_t want = y < 16 || y >= 48 ? 7 : 200;
    for (int x = 0; x < 64 * 3; ++x) ASSERT_EQ(out[y * 64 * 3 + x], want) << y;
  }
  // A tall picture: padded left and right.
  const Canvas t = p->Plan(30, 90, 0, 0, 0)[0];
  EXPECT_EQ(t.cx, 21);  // round(64 * 30 / 90) = 21 wide, (64 - 21) / 2.
  EXPECT_EQ(t.cw, 21);
}

TEST(PipelineTest, FloatImagesAreNormalizedPerChannel) {
  auto p = Pipeline::Compile(Custom(R"({"fields": [
      {"name": "image", "kind": "image", "dtype": "float32", "chw": true,
       "shape": [3, 2, 2]}],
      "pipeline": [{"center_crop": {"width": 2, "height": 2}},
                   {"normalize": {"mean": [0.5, 0.25, 0], "std": [0.5]}}]})"));
  ASSERT_TRUE(p.ok()) << p.status();
  Image img;
  img.width = img.scaled_width = img.height = img.scaled_height = 2;
  img.channels = 3;
  img.pixels = {255, 0, 51, 0, 255, 51, 255, 255, 51, 0, 0, 51};
  const Canvas c = p->Plan(2, 2, 0, 0, 0)[0];
  float out[12];
  p->Write(p->fields()[0], c, img.view(), 2, 2, reinterpret_cast<uint8_t*>(out));
  EXPECT_FLOAT_EQ(out[0], 1.0f);   // R of pixel 0: (1 - 0.5) / 0.5.
  EXPECT_FLOAT_EQ(out[1], -1.0f);  // R of pixel 1.
  EXPECT_FLOAT_EQ(out[4], -0.5f);  // G of pixel 0: (0 - 0.25) / 0.5.
  EXPECT_FLOAT_EQ(out[8], 0.4f);   // B: 0.2 / 0.5.
}

// Client decode adds each image field's F_jpeg and F_render, and a render
// record says what Write would have drawn.
TEST(PipelineTest, ClientDecodeFieldsAndRecords) {
  const std::string spec = R"({"fields": [
      {"name": "rgb", "kind": "image", "dtype": "float32", "chw": true, "shape": [3, 64, 64]},
      {"name": "seg", "kind": "mask", "shape": [64, 64], "file": 1},
      {"name": "label", "kind": "label", "dtype": "int32"}],
      "pipeline": [{"resize": {"mode": "letterbox", "size": 64, "fill": 7,
                               "interpolation": "bicubic"}},
                   {"flip": {"probability": 1}},
                   {"normalize": {"mean": [0.5], "std": [0.25]}}])";
  auto p = Pipeline::Compile(
      Custom(spec + R"(, "client_decode": {"cpu_share": 0.25, "max_bytes": 4096}})"));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<FieldPlan>& f = p->fields();
  ASSERT_EQ(f.size(), 5u);  // rgb, seg, label, rgb_jpeg, rgb_render.
  EXPECT_EQ(f[0].client_jpeg, 3);
  EXPECT_EQ(f[0].client_render, 4);
  EXPECT_EQ(f[1].client_jpeg, -1);  // Masks stay the daemon's.
  EXPECT_EQ(f[3].name, "rgb_jpeg");
  EXPECT_EQ(f[3].shape, std::vector<uint64_t>{4096 + 4});
  EXPECT_EQ(f[4].name, "rgb_render");
  EXPECT_EQ(f[4].shape, std::vector<uint64_t>{kRenderFloats});
  EXPECT_EQ(p->client_decode().share, 16384u);
  EXPECT_FALSE(p->cacheable());
  // The same pipeline decoded by the daemon: another ring, the same order.
  auto daemon = Pipeline::Compile(Custom(spec + "}"));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_NE(p->fingerprint(), daemon->fingerprint());
  EXPECT_EQ(p->order_fingerprint(), daemon->order_fingerprint());
  EXPECT_FALSE(daemon->order_fingerprint().empty());
  const std::vector<v1::ClientDecodeField> cf = p->ClientFields();
  ASSERT_EQ(cf.size(), 1u);
  EXPECT_EQ(cf[0].field(), "rgb");
  EXPECT_EQ(cf[0].render(), "rgb_render");
  EXPECT_TRUE(cf[0].chw());
  EXPECT_EQ(cf[0].dtype(), v1::DTYPE_FLOAT32);
  EXPECT_FLOAT_EQ(cf[0].scale(0), 1.0f / (255 * 0.25f));
  EXPECT_FLOAT_EQ(cf[0].offset(0), -2.0f);
  ASSERT_EQ(cf[0].record_size(), kRenderFloats);  // The slots, named in order.
  EXPECT_EQ(cf[0].record(kWhere), "where");
  EXPECT_EQ(cf[0].record(kBoxW), "box_w");
  EXPECT_EQ(cf[0].record(kProgressive), "progressive");
  // A 200 x 100 picture: letterboxed into rows 16..48, mirrored.
  const Canvas c = p->Plan(200, 100, 0, 0, 0)[0];
  float r[kRenderFloats];
  p->WriteRender(c, 200, 100, true, true, reinterpret_cast<uint8_t*>(r));
  const std::pair<RenderSlot, float> want[] = {
      {kWhere, 1}, {kSourceWidth, 200}, {kSourceHeight, 100}, {kX0, 0}, {kY0, 16},
      {kX1, 64}, {kY1, 48}, {kBoxX, 0}, {kBoxY, 0}, {kBoxW, 200}, {kBoxH, 100},
      {kHFlip, 1}, {kVFlip, 0}, {kFill, 7}, {kFilter, float(v1::INTERPOLATION_BICUBIC)},
      {kProgressive, 1}};
  ASSERT_EQ(std::size(want), static_cast<size_t>(kRenderFloats));
  for (const auto& [slot, value] : want) EXPECT_FLOAT_EQ(r[slot], value) << cf[0].record(slot);
}

// A shard member's field reads the file its dataset keeps that member in;
// a dataset without it, or with files only, is the field's error.
TEST(PipelineTest, MemberFieldsBindToTheFilesTheirDatasetKeeps) {
  const std::string fields = R"({"fields": [
      {"name": "image", "kind": "image", "shape": [8, 8, 3]},
      {"name": "caption", "kind": "encoded", "dtype": "uint8", "shape": [68], "member": "txt"}],
      "pipeline": [{"center_crop": {"width": 8, "height": 8}}]})";
  auto p = Pipeline::Compile(Custom(fields));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->files(), 1u);  // Not bound yet.
  Pipeline bound = *p;
  ASSERT_TRUE(bound.BindFiles(3, {"", "seg.png", "txt"}, "shards").ok());
  EXPECT_EQ(bound.fields()[1].file, 2u);
  EXPECT_EQ(bound.files(), 3u);
  Pipeline none = *p;
  EXPECT_EQ(none.BindFiles(2, {"", "seg.png"}, "shards").message(),
            "field 'caption' reads member 'txt', but the samples of shards keep only their "
            "picture and seg.png");
  Pipeline files = *p;
  EXPECT_EQ(files.BindFiles(1, {}, "folder:/d").message(),
            "field 'caption' reads member 'txt', but the samples of folder:/d are files, not "
            "shards' members");
  // Members are encoded fields' alone, never with `file`, and named plainly.
  for (const auto& [json, words] : std::vector<std::pair<std::string, std::string>>{
           {R"({"fields": [{"name": "m", "kind": "image", "shape": [8, 8, 3], "member": "txt"}]})",
            "member applies to encoded fields"},
           {R"({"fields": [{"name": "m", "kind": "encoded", "dtype": "uint8", "shape": [8],
               "member": "txt", "file": 1}]})",
            "member and file exclude each other"},
           {R"({"fields": [{"name": "m", "kind": "encoded", "dtype": "uint8", "shape": [8],
               "member": "../TXT"}]})",
            "must be at most 32 of a-z 0-9 . _ -"},
           {R"({"fields": [{"name": "m", "kind": "encoded", "dtype": "uint8", "shape": [8],
               "member": "cls", "text": true}]})",
            "text and member exclude each other"},
           {R"({"fields": [{"name": "m", "kind": "label", "dtype": "int64", "text": true}]})",
            "text applies to encoded fields"}}) {
    auto bad = Pipeline::Compile(Custom(json));
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_NE(bad.status().message().find(words), std::string::npos) << bad.status();
  }
}

// A text field reads a manifest line's file; shards' text is a member's.
TEST(PipelineTest, TextFieldsReadAManifestsFileNotAShardsMember) {
  auto p = Pipeline::Compile(Custom(R"({"fields": [
      {"name": "image", "kind": "image", "shape": [8, 8, 3]},
      {"name": "caption", "kind": "encoded", "dtype": "uint8", "shape": [68], "file": 1,
       "text": true}],
      "pipeline": [{"center_crop": {"width": 8, "height": 8}}]})"));
  ASSERT_TRUE(p.ok()) << p.status();
  Pipeline manifest = *p;
  ASSERT_TRUE(manifest.BindFiles(2, {}, "list:/m.tsv").ok());
  EXPECT_EQ(manifest.fields()[1].file, 1u);
  Pipeline one = *p;
  EXPECT_EQ(one.BindFiles(1, {}, "list:/m.tsv").message(),
            "fields read file 1 of each sample, but the samples of list:/m.tsv have 1 file(s)");
  Pipeline shards = *p;
  EXPECT_EQ(shards.BindFiles(2, {"", "seg.png"}, "shards").message(),
            "field 'caption' is text read from file 1 of each sample, but the samples of shards "
            "are shards' members: a shard's text is a member field (member \"txt\")");
}

}  // namespace
}  // namespace stoker
