// A server's model sources (--load [NAME=]PATH, --repository in Triton's
// layout) and the Prometheus text of several models merged into one.
#include "apps/model_repository.hpp"
#include "apps/triton_reports.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace salamander::apps;

namespace {

// A scratch directory, removed at the end.
struct scratch {
  fs::path dir =
      fs::temp_directory_path() / ("salamander_repo_" + std::to_string(::getpid()));
  scratch() { fs::create_directories(dir); }
  ~scratch() { fs::remove_all(dir); }
  void file(const fs::path& p) {
    fs::create_directories((dir / p).parent_path());
    std::ofstream(dir / p) << "x";
  }
};

} // namespace

TEST_CASE("the --load option takes an optional name before '='", "[serve]") {
  auto plain = parse_load("runs/cnn.ckpt");
  CHECK(plain.name.empty());
  CHECK(plain.path == "runs/cnn.ckpt");
  auto named = parse_load("digits=runs/mlp.ckpt");
  CHECK(named.name == "digits");
  CHECK(named.path == "runs/mlp.ckpt");
  // text before '=' that cannot be a name belongs to the path
  auto odd = parse_load("runs/a=b/cnn.ckpt");
  CHECK(odd.name.empty());
  CHECK(odd.path == "runs/a=b/cnn.ckpt");
  CHECK_THROWS_AS(parse_load("=x.ckpt"), std::invalid_argument);
  CHECK_THROWS_AS(parse_load("cnn="), std::invalid_argument);
}

TEST_CASE("model names are what a URL path segment carries", "[serve]") {
  CHECK(valid_model_name("cnn"));
  CHECK(valid_model_name("resnet-18_v2.1"));
  CHECK_FALSE(valid_model_name(""));
  CHECK_FALSE(valid_model_name("a/b"));
  CHECK_FALSE(valid_model_name("a b"));
  CHECK_FALSE(valid_model_name("stats")); // /v2/models/stats is every model's
  CHECK_FALSE(valid_model_name(std::string(129, 'a')));
}

TEST_CASE("a repository serves each model's highest version with a model.ckpt",
          "[serve]") {
  scratch s;
  s.file("cnn/1/model.ckpt");
  s.file("cnn/10/model.ckpt");
  s.file("cnn/9/model.ckpt");
  s.file("cnn/11/notes.txt");      // no model.ckpt: not a version
  s.file("cnn/latest/model.ckpt"); // not a number: not a version
  s.file("mlp/3/model.ckpt");
  s.file("empty/1/other.bin");
  s.file("README.md"); // a file, not a model
  fs::create_directories(s.dir / "bad name");
  auto found = scan_repository(s.dir.string());
  REQUIRE(found.size() == 3);
  CHECK(found["cnn"].version == "10");
  CHECK(found["cnn"].path == (s.dir / "cnn/10/model.ckpt").string());
  CHECK(found["mlp"].version == "3");
  CHECK(found["empty"].path.empty());
  CHECK(found["empty"].version.find("model.ckpt") != std::string::npos);
  CHECK_THROWS_AS(scan_repository((s.dir / "nowhere").string()), std::invalid_argument);
}

TEST_CASE("several models' metrics: each family's HELP and TYPE once", "[serve]") {
  auto model = [](const std::string& m) {
    return "# HELP a_total A.\n# TYPE a_total counter\na_total{model=\"" + m +
           "\"} 1\n# HELP b B.\n# TYPE b gauge\nb{model=\"" + m + "\"} 2\nb{model=\"" +
           m + "\",x=\"1\"} 3\n";
  };
  auto merged = merge_metric_families({model("cnn"), model("mlp")});
  CHECK(merged == "# HELP a_total A.\n# TYPE a_total counter\n"
                  "a_total{model=\"cnn\"} 1\na_total{model=\"mlp\"} 1\n"
                  "# HELP b B.\n# TYPE b gauge\n"
                  "b{model=\"cnn\"} 2\nb{model=\"cnn\",x=\"1\"} 3\n"
                  "b{model=\"mlp\"} 2\nb{model=\"mlp\",x=\"1\"} 3\n");
  CHECK(merge_metric_families({model("cnn")}) == model("cnn"));
  CHECK(merge_metric_families({}).empty());
}
