// The decoders of outside input, on the inputs their fuzz harnesses found
// (fuzz/regressions/): each fix asserted here too, so that a build without
// clang-14 (no fuzz.smoke) still checks them.
#include "actors/cluster/auth.hpp"
#include "actors/cluster/cluster_toml.hpp"
#include "actors/train/stream_format.hpp"
#include "apps/console_parse.hpp"
#include "apps/infer_request.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

using namespace salamander;
namespace sf = actors::stream_format;

TEST_CASE("a cluster file's port is written in decimal digits only", "[unit][cluster_file]") {
  CHECK(actors::parse_address("192.0.2.11:7101") ==
        std::pair<std::string, uint16_t>("192.0.2.11", 7101));
  CHECK(actors::parse_address("[::1]:0").second == 0);
  for (auto bad : {"h: 80", "h:+80", "h:0x50", "h:80 ", "h:65536", "h:", ":80", "h"}) {
    INFO(bad);
    CHECK_THROWS_AS(actors::parse_address(bad), std::invalid_argument);
  }
}

TEST_CASE("a cluster file refuses characters outside ASCII outside comments",
          "[unit][cluster_file]") {
  // comments may be in any language, and a byte order mark is skipped
  auto nodes = actors::parse_cluster_file(
      "\xEF\xBB\xBF# K\xC3\xBC" "che\n[[node]]\nname = \"kitchen\" # \xC2\xA1s\xC3\xAD!\n"
      "address = \"h:1\"\n",
      "c.toml");
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0].name == "kitchen");
  // elsewhere toml++ 3.3.0 could reach undefined behaviour: refused first, by line
  std::pair<const char*, const char*> cases[] = {
      {"[[node]]\n\xC3\xA9 = 1\n", "c.toml:2:"},
      {"[[node]]\nname = \"k\xC3\xBC" "che\"\n", "c.toml:2:"},
      {"[[node]]\nname = \"\"\"a\\\n  \xC3\xA9\"\"\"\n", "c.toml:3:"},
      {"1=1..[n\"=\xD2\x90\"", "c.toml:1:"},
  };
  for (auto [text, where] : cases) {
    INFO(text);
    try {
      actors::parse_cluster_file(text, "c.toml");
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(std::string(where) + " a character outside ASCII") !=
            std::string::npos);
    }
  }
}

TEST_CASE("stream log files are named and read back one way only", "[unit][stream]") {
  CHECK(sf::log_name(42) == "batch-000000000042.bin");
  CHECK(sf::log_number("batch-000000000042.bin") == uint64_t{42});
  CHECK(sf::log_number(sf::log_name(12345678901234)) == uint64_t{12345678901234});
  for (auto other : {"batch-0000.bin", "batch-99999999999999999999.bin", "batch-x.bin",
                     "batch-.bin", "batch-000000000042.bin.bin", "notes.txt"}) {
    INFO(other);
    CHECK_FALSE(sf::log_number(other).has_value());
  }
}

TEST_CASE("a stream log file round-trips and refuses damage", "[unit][stream]") {
  std::string body(2 * sf::record_bytes, '\x03');
  auto file = sf::encode_log(7, 2, 1570, body);
  auto h = sf::check_log("b.bin", file);
  CHECK(h.batch == 7);
  CHECK(h.samples == 2);
  CHECK(h.position == 1570);
  file.back() ^= 1;
  CHECK_THROWS_AS(sf::check_log("b.bin", file), sf::log_error);
  CHECK_THROWS_AS(sf::check_log("b.bin", file.substr(0, 39)), sf::log_error);
}

TEST_CASE("an inference request is read, and one nested too deep is refused unwalked",
          "[unit][serve]") {
  apps::model_io input;
  input.input_shape = {-1, 4};
  auto r = apps::parse_infer_request(
      R"({"id":"r1","inputs":[{"name":"input","shape":[2,4],"datatype":"FP32",)"
      R"("data":[[1,2,3,4],[5,6,7,8]]}]})",
      std::nullopt, input);
  CHECK(r.shape == std::vector<int64_t>{2, 4});
  CHECK(r.data.size() == 8);
  CHECK(r.data[7] == 8.0f);
  CHECK(r.has_id);
  // 100,000 '[' used to overflow the stack while flattening "data"
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  for (auto field : {"data", "shape"}) {
    std::string body = R"({"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32",")";
    body += field + std::string("\":") + deep + "}]}";
    try {
      apps::parse_infer_request(body, std::nullopt, input);
      FAIL("accepted");
    } catch (const apps::request_error& e) {
      CHECK(std::string(e.what()).find("100003 deep, more than the limit of 64") !=
            std::string::npos);
    }
  }
}

TEST_CASE("kill stage refuses numbers that would wrap round to another stage",
          "[unit][console]") {
  auto r = apps::parse_console("kill stage 4294967297");
  CHECK(r.commands.empty());
  CHECK(r.error.find("is not a stage number") != std::string::npos);
  auto top = apps::parse_console("kill stage 4294967295");
  REQUIRE(top.commands.size() == 1);
  CHECK(top.commands[0].stage == 4294967295u);
}

TEST_CASE("a node signs only challenges make_challenge could give", "[unit][auth]") {
  auto c = actors::make_challenge();
  CHECK(actors::is_challenge(c));
  // with ':' allowed, node "a" proving "b:" + c also proved node "a:b" for c
  CHECK(actors::prove("s3cret", "node", "a", "b:" + c).empty());
  CHECK(actors::prove("s3cret", "node", "a", c.substr(1)).empty());
  CHECK_FALSE(actors::verify("s3cret", "node", "a", "b:" + c, ""));
  auto p = actors::prove("s3cret", "node", "a:b", c);
  CHECK(actors::verify("s3cret", "node", "a:b", c, p));
  for (auto bad : {"", "not hex", "3F1C0E9A5B7D2E4F8A6C1B0D9E7F5A3C"}) {
    CHECK_FALSE(actors::is_challenge(bad));
  }
}
