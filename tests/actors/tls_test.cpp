// TLS links between actor systems in one process, with material from
// deploy/make-certs.sh: peers of one CA talk; a peer of another CA and a
// plaintext peer are refused, counted, and a silent handshake is cut. And
// the buffers a large message grew, freed on both kinds of connection.
#include "actors/node/network.hpp"
#include "actors/node/node.hpp"
#include "actors/node/system.hpp"
#include "actors/node/tls.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>

using namespace salamander;
using namespace std::chrono_literals;

namespace {

// One CA with names a and b, and another CA that also has a b.
const std::filesystem::path& certs() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("salamander-tls-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::string script = SALAMANDER_SOURCE_DIR "/deploy/make-certs.sh";
    REQUIRE(std::system((script + " -o " + d.string() + " a b >/dev/null").c_str()) == 0);
    REQUIRE(std::system((script + " -o " + (d / "rogue").string() + " b >/dev/null").c_str()) ==
            0);
    return d;
  }();
  // removed when the test program ends
  static const struct remover {
    ~remover() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_at_exit;
  return dir;
}

actors::tls_options material(const std::string& name) {
  actors::tls_options o;
  o.dir = (certs() / name).string();
  o.handshake_timeout = 2s;
  return o;
}

// An actor system and the configuration it keeps referring to (CAF reads
// the certificate paths from it at every new connection).
struct tls_system {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  explicit tls_system(const actors::tls_options& tls) {
    actors::configure(cfg);
    actors::configure_tls(cfg, tls);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  caf::actor_system& operator*() {
    return *sys;
  }
};

std::unique_ptr<tls_system> make_system(const actors::tls_options& tls) {
  return std::make_unique<tls_system>(tls);
}

caf::behavior plus_one() {
  return {[](int x) { return x + 1; }};
}

// The answer of the actor published at `port` to `question`, asked
// through a connection from `client`.
template <class Answer, class Question>
caf::expected<Answer> answer_at(caf::actor_system& client, uint16_t port,
                                const Question& question) {
  auto peer = actors::remote_actor(client, "127.0.0.1", port);
  if (!peer) {
    return peer.error();
  }
  caf::expected<Answer> out{caf::sec::request_timeout};
  caf::scoped_actor self{client};
  self->request(*peer, 30s, question)
      .receive([&](Answer y) { out = y; }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

// Asks `server` for 41 + 1 through a connection from `client`.
caf::expected<int> ask(caf::actor_system& client, uint16_t port) {
  return answer_at<int>(client, port, 41);
}

caf::behavior length_of() {
  return {[](const std::string& s) { return static_cast<int64_t>(s.size()); }};
}

// The length `server`'s actor at `port` gives for `s`, sent from `client`.
caf::expected<int64_t> length_at(caf::actor_system& client, uint16_t port,
                                 const std::string& s) {
  return answer_at<int64_t>(client, port, s);
}

// The bytes actors::release_connection_buffers frees in `sys`.
size_t released(caf::actor_system& sys) {
  auto freed = std::make_shared<std::promise<size_t>>();
  auto got = freed->get_future();
  actors::release_connection_buffers(sys, [freed](size_t n) { freed->set_value(n); });
  REQUIRE(got.wait_for(60s) == std::future_status::ready);
  return got.get();
}

// A large message to `server` grows its connection's receive buffer to
// the message; the release frees it, and the connection carries large and
// small messages after it.
void check_release(caf::actor_system& server, caf::actor_system& client) {
  auto lengths = server.spawn(length_of);
  auto port = actors::publish(lengths, 0, "127.0.0.1");
  REQUIRE(port);
  const std::string large(6'000'000, 'x');
  REQUIRE(length_at(client, *port, large) == int64_t{6'000'000});
  CHECK(released(server) >= large.size());
  CHECK(length_at(client, *port, "small") == int64_t{5});
  CHECK(released(server) < large.size() / 10); // small messages grew nothing
  CHECK(length_at(client, *port, large) == int64_t{6'000'000});
  CHECK(released(server) >= large.size());
  caf::anon_send_exit(lengths, caf::exit_reason::user_shutdown);
}

} // namespace

TEST_CASE("make-certs.sh material checks out, and mixed-up material does not", "[tls]") {
  CHECK(actors::check_tls(material("a")).empty());
  CHECK(actors::tls_name(material("a")) == "a");
  auto foreign = material("a");
  foreign.dir = (certs() / "mixed").string();
  std::filesystem::create_directories(foreign.dir);
  std::filesystem::copy_file(certs() / "a/ca.pem", foreign.ca_file());
  std::filesystem::copy_file(certs() / "rogue/b/cert.pem", foreign.cert_file());
  std::filesystem::copy_file(certs() / "rogue/b/key.pem", foreign.key_file());
  CHECK_THAT(actors::check_tls(foreign), Catch::Contains("does not verify against"));
  std::filesystem::copy_file(certs() / "a/key.pem", foreign.key_file(),
                             std::filesystem::copy_options::overwrite_existing);
  CHECK_THAT(actors::check_tls(foreign), Catch::Contains("is not the key of"));
  auto missing = material("nobody");
  CHECK_THAT(actors::check_tls(missing), Catch::Contains("cannot read"));
  CHECK_THROWS_WITH(actors::checked_tls(missing.dir), Catch::Contains("cannot read"));
  CHECK_FALSE(actors::tls_from("none").enabled());
}

TEST_CASE("TLS links: one CA talks, another CA and plaintext are refused", "[tls]") {
  auto server = make_system(material("a"));
  REQUIRE(actors::uses_tls(**server));
  auto echo = (**server).spawn(plus_one);
  auto port = actors::publish(echo, 0, "127.0.0.1");
  REQUIRE(port);

  SECTION("a peer of the same CA") {
    auto client = make_system(material("b"));
    auto before = actors::tls_refusals();
    auto y = ask(**client, *port);
    REQUIRE(y);
    CHECK(*y == 42);
    CHECK(actors::tls_refusals() == before);
  }
  SECTION("a peer whose certificate another CA signed") {
    auto client = make_system(material("rogue/b"));
    auto before = actors::tls_refusals();
    auto y = ask(**client, *port);
    CHECK_FALSE(y);
    CHECK(actors::tls_refusals() > before);
  }
  SECTION("a plaintext peer: its handshake never starts, and is cut") {
    caf::actor_system_config cfg;
    actors::configure(cfg);
    caf::actor_system client{cfg};
    REQUIRE_FALSE(actors::uses_tls(client));
    auto before = actors::tls_refusals();
    auto y = ask(client, *port);
    CHECK_FALSE(y);
    CHECK(actors::tls_refusals() > before);
  }
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_CASE("the buffers a large message grew are freed, and the connection still carries",
          "[actor][tls][memory]") {
  SECTION("plaintext") {
    caf::actor_system_config scfg;
    actors::configure(scfg);
    caf::actor_system server{scfg};
    caf::actor_system_config ccfg;
    actors::configure(ccfg);
    caf::actor_system client{ccfg};
    check_release(server, client);
  }
  SECTION("TLS") {
    auto server = make_system(material("a"));
    auto client = make_system(material("b"));
    check_release(**server, **client);
  }
}
