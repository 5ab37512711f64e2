// A gtest fixture for suites of daemon tests over one generated folder
// dataset (2 classes x 10 photo-like JPEGs of 300-420 px, made once per
// suite and removed after it), and a train spec over it at 64 px with full
// decode, which keeps decode the costly stage. Derive and use Spec().
#ifndef STOKER_TESTS_FOLDER_SUITE_H_
#define STOKER_TESTS_FOLDER_SUITE_H_

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "proto/stoker.pb.h"
#include "tests/testdata.h"

namespace stoker::testing {

class FolderSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(testdata::MakeTempDir("suite-data"));
    testdata::FolderSpec spec;
    spec.classes = 2;
    spec.per_class = 10;
    spec.min_side = 300;
    spec.max_side = 420;
    ASSERT_TRUE(testdata::MakeFolderDataset(*root_, spec).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*root_);
    delete root_;
  }
  static v1::SessionSpec Spec(uint64_t seed = 3) {
    v1::SessionSpec s;
    s.mutable_dataset()->mutable_folder()->set_path(*root_);
    s.set_transform(v1::TRANSFORM_TRAIN);
    s.set_batch_size(4);
    s.set_image_size(64);
    s.set_shuffle(true);
    s.set_seed(seed);
    s.set_decode(v1::DECODE_FULL);
    return s;
  }
  inline static std::string* root_ = nullptr;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_FOLDER_SUITE_H_
