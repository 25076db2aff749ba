// The operator's tools without a cluster: the console's command language,
// the cluster-secret handshake, the metrics log and the progress line.
#include "actors/cluster/auth.hpp"
#include "actors/job/metrics.hpp"
#include "apps/console_parse.hpp"
#include "apps/progress_text.hpp"

#include "actors/node/port_probe.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

using namespace salamander;
using apps::console_op;

TEST_CASE("console lines parse into commands", "[unit][console]") {
  auto r = apps::parse_console(
      "status; nodes ;plan;; metrics; kill stage 2; kill node pi-kitchen; "
      "slow node nuc 0.25; repartition; repartition 1,2,1; replicate; "
      "checkpoint save '/tmp/a b;c.ckpt'; pause; resume; help kill; quit");
  REQUIRE(r.error.empty());
  std::vector<console_op> ops;
  for (auto& c : r.commands) {
    ops.push_back(c.op);
  }
  CHECK(ops == std::vector<console_op>{
                   console_op::status, console_op::nodes, console_op::plan,
                   console_op::metrics, console_op::kill_stage, console_op::kill_node,
                   console_op::slow_node, console_op::repartition,
                   console_op::repartition, console_op::replicate,
                   console_op::checkpoint_save, console_op::pause, console_op::resume,
                   console_op::help, console_op::quit});
  CHECK(r.commands[4].stage == 2);
  CHECK(r.commands[5].args == std::vector<std::string>{"pi-kitchen"});
  CHECK(r.commands[6].args[0] == "nuc");
  CHECK(r.commands[6].factor == 0.25);
  CHECK(r.commands[7].args.empty());
  CHECK(r.commands[8].args == std::vector<std::string>{"1,2,1"});
  // quotes keep blanks and ';' inside a path
  CHECK(r.commands[10].args == std::vector<std::string>{"/tmp/a b;c.ckpt"});
  CHECK(r.commands[13].args == std::vector<std::string>{"kill"});
  // a federated job's client: the same command, numbered like a stage
  auto client = apps::parse_console("kill client 3");
  REQUIRE(client.error.empty());
  CHECK(client.commands.at(0).op == console_op::kill_stage);
  CHECK(client.commands.at(0).stage == 3);
  auto cut = apps::parse_console("cut node pi-hall 7.5");
  REQUIRE(cut.error.empty());
  CHECK(cut.commands.at(0).op == console_op::cut_node);
  CHECK(cut.commands.at(0).args.at(0) == "pi-hall");
  CHECK(cut.commands.at(0).seconds == 7.5);
  CHECK(apps::parse_console("exit").commands.at(0).op == console_op::quit);
  CHECK(apps::parse_console("  ;  ").commands.empty());
}

TEST_CASE("bad console lines say what is wrong and run nothing", "[unit][console]") {
  auto expect_error = [](const std::string& line, const std::string& part) {
    auto r = apps::parse_console(line);
    INFO(line << " -> " << r.error);
    CHECK(r.commands.empty());
    CHECK_THAT(r.error, Catch::Contains(part));
  };
  expect_error("status; stauts", "did you mean 'status'");
  expect_error("nodse", "did you mean 'nodes'");
  expect_error("frobnicate", "unknown command 'frobnicate'");
  expect_error("kill stage two", "'two' is not a stage number");
  expect_error("kill stage -1", "is not a stage number");
  expect_error("kill client x", "'x' is not a client number");
  expect_error("kill pi", "usage: kill stage N | kill client N | kill node NAME");
  expect_error("slow node nuc", "usage: slow node NAME FACTOR");
  expect_error("slow node nuc 0", "FACTOR must be a number in (0, 1]");
  expect_error("slow node nuc 1.5", "FACTOR must be a number in (0, 1]");
  expect_error("slow node nuc fast", "FACTOR must be a number in (0, 1]");
  expect_error("cut nuc 5", "usage: cut node NAME SECONDS");
  expect_error("cut node nuc", "usage: cut node NAME SECONDS");
  expect_error("cut node nuc 0", "SECONDS must be a number in (0, 600]");
  expect_error("cut node nuc 601", "SECONDS must be a number in (0, 600]");
  expect_error("cut node nuc inf", "SECONDS must be a number in (0, 600]");
  expect_error("cut node nuc 5s", "SECONDS must be a number in (0, 600]");
  expect_error("checkpoint load x", "checkpoint save PATH");
  expect_error("status now", "takes no arguments");
  expect_error("repartition 1,1 2,2", "takes at most a balance");
  expect_error("checkpoint save 'open", "unterminated quote");
}

TEST_CASE("help lists every command with its usage", "[unit][console]") {
  auto help = apps::console_help();
  for (auto& w : apps::console_words()) {
    CHECK_THAT(help, Catch::Contains(w));
    CHECK_FALSE(apps::console_usage(w).empty());
  }
  CHECK(apps::console_usage("nope").empty());
}

TEST_CASE("proofs verify only with the same secret, role, name and challenge",
          "[unit][auth]") {
  auto c = actors::make_challenge();
  CHECK(c.size() == 32);
  CHECK(c.find_first_not_of("0123456789abcdef") == std::string::npos);
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    seen.insert(actors::make_challenge());
  }
  CHECK(seen.size() == 100);

  auto p = actors::prove("s3cret", "node", "pi", c);
  CHECK(actors::verify("s3cret", "node", "pi", c, p));
  CHECK_FALSE(actors::verify("s3cre", "node", "pi", c, p));        // wrong secret
  CHECK_FALSE(actors::verify("", "node", "pi", c, p));             // missing secret
  CHECK_FALSE(actors::verify("s3cret", "supervisor", "pi", c, p)); // a reflected proof
  CHECK_FALSE(actors::verify("s3cret", "node", "nuc", c, p));      // another node's
  CHECK_FALSE(
      actors::verify("s3cret", "node", "pi", actors::make_challenge(), p)); // replayed
  CHECK_FALSE(actors::verify("s3cret", "node", "pi", c, ""));
  // an open cluster: no secret on either side still pairs up
  CHECK(actors::verify("", "node", "pi", c, actors::prove("", "node", "pi", c)));
}

TEST_CASE("a Bearer header carries a secret that must match byte for byte",
          "[unit][auth]") {
  using salamander::actors::bearer_token;
  using salamander::actors::same_secret;
  CHECK(bearer_token("Bearer s3cret") == "s3cret");
  CHECK(bearer_token("bearer s3cret")
            .empty()); // the scheme as the dashboard and repository read it
  CHECK(bearer_token("s3cret").empty());
  CHECK(bearer_token("").empty());
  CHECK(same_secret("s3cret", "s3cret"));
  CHECK_FALSE(same_secret("s3cret", "s3creT"));
  CHECK_FALSE(same_secret("s3cret", "s3cre"));
  CHECK_FALSE(same_secret("", "s3cret"));
}

TEST_CASE("the cluster secret comes from a file or the environment", "[unit][auth]") {
  auto dir = std::filesystem::temp_directory_path() / "salamander-secret-test";
  std::filesystem::create_directories(dir);
  auto file = (dir / "secret").string();
  std::ofstream(file) << "correct horse\n";
  ::unsetenv("SALAMANDER_SECRET");
  CHECK(actors::load_secret(file) == std::optional<std::string>("correct horse"));
  CHECK_FALSE(actors::load_secret("").has_value());
  ::setenv("SALAMANDER_SECRET", "from env", 1);
  CHECK(actors::load_secret("") == std::optional<std::string>("from env"));
  CHECK(actors::load_secret(file) ==
        std::optional<std::string>("correct horse")); // file wins
  ::setenv("SALAMANDER_SECRET", "", 1);
  CHECK_THROWS_WITH(actors::load_secret(""), Catch::Contains("empty"));
  ::unsetenv("SALAMANDER_SECRET");
  std::ofstream(file) << "\n";
  CHECK_THROWS_WITH(actors::load_secret(file), Catch::Contains("is empty"));
  CHECK_THROWS_WITH(actors::load_secret((dir / "none").string()),
                    Catch::Contains("cannot read"));
  std::filesystem::permissions(file, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write |
                                         std::filesystem::perms::others_read);
  CHECK_THAT(actors::secret_file_warning(file), Catch::Contains("chmod 600"));
  std::filesystem::permissions(file, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write);
  CHECK(actors::secret_file_warning(file).empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("the lineage audit finds duplicates and gaps", "[unit][metrics]") {
  CHECK(actors::check_lineage({}).empty());
  CHECK(actors::check_lineage({0, 1, 2, 3}).empty());
  CHECK_THAT(actors::check_lineage({0, 1, 1, 2}),
             Catch::Contains("batch 1 appears twice"));
  CHECK_THAT(actors::check_lineage({0, 2, 3}),
             Catch::Contains("missing or out of order"));
  CHECK_THAT(actors::check_lineage({1, 0}), Catch::Contains("position 0 holds batch 1"));
}

TEST_CASE("the metrics log writes one JSON object per line", "[unit][metrics]") {
  auto dir = std::filesystem::temp_directory_path() / "salamander-metrics-test";
  std::filesystem::remove_all(dir);
  auto path = (dir / "job" / "metrics.jsonl").string(); // the directory is made
  {
    actors::metrics_log log(path);
    log.write("start", {{"model", "cnn"}});
    for (int b = 0; b < 3; ++b) {
      log.write("batch", {{"batch", b}, {"loss", 1.0 / (b + 1)}});
    }
    log.write("failure", {{"what", "node \"n2\" went away\n"}});
  }
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) {
    lines.push_back(nlohmann::json::parse(line));
  }
  REQUIRE(lines.size() == 5);
  CHECK(lines[0]["event"] == "start");
  CHECK(lines[0]["model"] == "cnn");
  CHECK(lines[2]["batch"] == 1);
  CHECK(lines[4]["what"] == "node \"n2\" went away\n"); // escaped and back
  for (size_t i = 1; i < lines.size(); ++i) {
    CHECK(lines[i]["t"].get<double>() >= lines[i - 1]["t"].get<double>());
  }
  CHECK_THROWS_WITH(actors::metrics_log("/proc/nope/metrics.jsonl"),
                    Catch::Contains("/proc/nope/metrics.jsonl"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a field that is not UTF-8 is logged with replacement characters, not thrown",
          "[unit][metrics]") {
  // `checkpoint save` to a Latin-1 file name logs the path; the save must not fail
  auto dir = std::filesystem::temp_directory_path() / "salamander-metrics-utf8-test";
  std::filesystem::remove_all(dir);
  auto path = (dir / "metrics.jsonl").string();
  {
    actors::metrics_log log(path);
    CHECK_NOTHROW(log.write("checkpoint", {{"path", std::string("/tmp/caf\xe9.ckpt")}}));
  }
  std::ifstream in(path);
  std::string line;
  REQUIRE(std::getline(in, line));
  auto j = nlohmann::json::parse(line);
  CHECK(j["path"] == "/tmp/caf\xef\xbf\xbd.ckpt"); // U+FFFD
  std::filesystem::remove_all(dir);
}

namespace {

// a pipeline's status at 80 columns: 96 characters in full
const std::vector<apps::progress_field> status = {
    {"[training]", 10},   {"epoch 1/1", 7},
    {"batch 412/937", 9}, {"3830 samples/s", 5},
    {"loss 0.4120", 4},   {"eta 19s", 8},
    {"plan v2", 2},       {"ok, recovered 1x (0.06 s)", 3},
};

} // namespace

TEST_CASE(
    "a progress line fits the terminal by squeezing, then dropping the least kept fields",
    "[unit][progress]") {
  auto full = apps::join_fields(status, "  ");
  REQUIRE(full.size() > 80);
  CHECK(apps::fit_line(status, 200) == full);
  for (size_t width : {120, 79, 60, 40, 20, 12}) {
    auto line = apps::fit_line(status, width);
    CAPTURE(width, line);
    CHECK(line.size() <= width);
    CHECK(line.rfind("[training]", 0) == 0); // the phase is the last to go
  }
  // at 79 columns the plan goes first, and the ETA outlives the loss and the rate
  CHECK(apps::fit_line(status, 79).find("plan v2") == std::string::npos);
  CHECK(apps::fit_line(status, 79).find("eta 19s") != std::string::npos);
  auto narrow = apps::fit_line(status, 40);
  CHECK(narrow.find("eta 19s") != std::string::npos);
  CHECK(narrow.find("loss") == std::string::npos);
  CHECK(apps::fit_line({{"[recovering]", 9}}, 8) == "[reco...");
}

TEST_CASE("the terminal width comes from the terminal, then $COLUMNS, then 80",
          "[unit][progress]") {
  // a pipe is no terminal
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::setenv("COLUMNS", "132", 1);
  CHECK(apps::terminal_width(fds[1]) == 132);
  ::unsetenv("COLUMNS");
  CHECK(apps::terminal_width(fds[1]) == 80);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST_CASE("the ETA counts training time only and holds while the job is paused",
          "[unit][progress]") {
  apps::eta_clock eta;
  // 10 batches per second while training: 100 left take 10 s
  CHECK(eta.update(true, 0, 200, 0.0) == -1);
  CHECK(eta.update(true, 100, 100, 10.0) == Approx(10.0));
  CHECK_FALSE(eta.held());
  // paused for a minute: the ETA stays, it does not grow
  CHECK(eta.update(false, 100, 100, 30.0) == Approx(10.0));
  CHECK(eta.update(false, 100, 100, 70.0) == Approx(10.0));
  CHECK(eta.held());
  // training again: the pause does not count
  CHECK(eta.update(true, 100, 100, 70.0) == Approx(10.0));
  CHECK(eta.update(true, 150, 50, 75.0) == Approx(5.0));
  CHECK_FALSE(eta.held());
  CHECK(apps::format_duration(5.0) == "5s");
  CHECK(apps::format_duration(245) == "4m05s");
  CHECK(apps::format_duration(7380) == "2h03m");
  CHECK(apps::format_duration(-1) == "?");
}

TEST_CASE("a console attaching mid-job starts from the job's own average",
          "[unit][progress]") {
  apps::eta_clock eta;
  CHECK(eta.update(true, 500, 500, 100.0) == Approx(100.0));
  CHECK(eta.update(false, 500, 500, 160.0) == Approx(100.0));
  apps::eta_clock paused_at_once;
  CHECK(paused_at_once.update(false, 500, 500, 160.0) == -1);
  CHECK_FALSE(paused_at_once.held());
}

TEST_CASE("a node on every address tells its supervisor the address that reaches it; a port "
          "is probed open and closed",
          "[unit][operate]") {
  // loopback reaches loopback from loopback; a name that does not resolve has no route
  CHECK(salamander::actors::outward_address("127.0.0.1", 9) == "127.0.0.1");
  CHECK(salamander::actors::outward_address("no-such-host.invalid", 9).empty());

  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
  socklen_t len = sizeof at;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len) == 0);
  auto port = ntohs(at.sin_port);
  REQUIRE(::listen(fd, 4) == 0);
  CHECK(salamander::actors::port_accepts("127.0.0.1", port, std::chrono::seconds(5)));
  ::close(fd);
  CHECK_FALSE(salamander::actors::port_accepts("127.0.0.1", port, std::chrono::seconds(5)));
}
