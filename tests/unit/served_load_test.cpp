// The ledger through which the serving jobs of one server plan around each
// other (actors/serve/served_load.hpp): what a job sees of the others.
#include "actors/serve/served_load.hpp"

#include <catch2/catch.hpp>

using salamander::actors::served_load;

TEST_CASE("a serving job sees the other models' work on a node, not its own model's",
          "[unit][serve]") {
  served_load load;
  load.place(1, "a", {{"n1", {0.002, 100}}, {"n2", {0.001, 50}}});
  load.place(2, "b", {{"n1", {0.004, 300}}});
  CHECK(load.jobs() == 2);
  // b sees a's work; a sees b's; a third model sees both, summed
  CHECK(load.others("b", "n1").seconds_per_row == Approx(0.002));
  CHECK(load.others("a", "n1").seconds_per_row == Approx(0.004));
  CHECK(load.others("a", "n1").bytes == Approx(300));
  CHECK(load.others("c", "n1").seconds_per_row == Approx(0.006));
  CHECK(load.others("c", "n1").bytes == Approx(400));
  CHECK(load.others("c", "n3").seconds_per_row == 0);
  // a reload: a's new version (job 3) does not plan around its old one,
  // which stops once it serves; b sees both until then
  load.place(3, "a", {{"n2", {0.002, 80}}});
  CHECK(load.others("a", "n1").seconds_per_row == Approx(0.004));
  CHECK(load.others("a", "n2").seconds_per_row == 0);
  CHECK(load.others("b", "n2").seconds_per_row == Approx(0.003));
  load.clear(1);
  CHECK(load.others("b", "n1").seconds_per_row == 0);
  CHECK(load.others("b", "n2").bytes == Approx(80));
  // a new placement replaces the job's last; an empty one clears it
  load.place(2, "b", {{"n2", {0.001, 10}}});
  CHECK(load.others("a", "n1").seconds_per_row == 0);
  CHECK(load.others("a", "n2").bytes == Approx(10));
  load.place(2, "b", {});
  CHECK(load.jobs() == 1);
}
