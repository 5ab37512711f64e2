// The split between the CPU pool and a second decode engine, against
// simulated sessions: it finds the share that delivers most, keeps the CPU
// alone where the engine does not pay, follows an engine that gets slower,
// and survives measurement noise.
#include "server/pool/engine_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace stoker {
namespace {

// A session whose batches of `images` JPEGs the CPU pool decodes at `cpu`
// images/s while the engine decodes its share at `gpu` images/s: a batch
// takes the slower part, plus `cost` seconds per image the engine takes
// (what feeding it costs the rest), times up to +-`noise`.
struct Session {
  double cpu = 9424;  // 16 cores at 589 JPEGs/s each.
  double gpu = 15000;
  double cost = 0;
  double noise = 0;
  double images = 256;
  std::mt19937 rng{7};

  double Rate(double share) const {  // Batches/s, without noise.
    // An engine of rate 0 (broken, or all another session's) still ends a
    // round: its caller gives up on it after a while.
    const double engine = share * images / std::max(gpu, 1e-3);
    return 1 / (std::max((1 - share) * images / cpu, engine) + share * images * cost);
  }
  double Seconds(double share, uint32_t batches) {
    std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
    return batches / Rate(share) * (noise > 0 ? jitter(rng) : 1);
  }
  // The best share's rate, on a grid of 1/1024.
  double Best() const {
    double best = 0;
    for (int i = 0; i <= 1024; ++i) best = std::max(best, Rate(i / 1024.0));
    return best;
  }
};

// Runs `rounds` rounds; the number of rounds until the split settled (or
// -1), and the delivered rate of the last `tail` rounds.
struct Rounds {
  int settled_after = -1;
  double tail_rate = 0;
};
Rounds RunRounds(EngineSplit& split, Session& session, int rounds, int tail = 16) {
  Rounds run;
  double batches = 0, seconds = 0;
  for (int r = 0; r < rounds; ++r) {
    const double t = session.Seconds(split.share(), split.window());
    if (r >= rounds - tail) {
      batches += split.window();
      seconds += t;
    }
    split.Observe(split.window(), t);
    if (run.settled_after < 0 && split.phase() == EngineSplit::Phase::kSettled) {
      run.settled_after = r + 1;
    }
  }
  run.tail_rate = batches / seconds;
  return run;
}

TEST(EngineSplit, AFasterEngineTakesTheShareThatDeliversMost) {
  Session session;
  EngineSplit split;
  EXPECT_EQ(split.share(), 0) << "the CPU alone first";
  const Rounds run = RunRounds(split, session, 40);
  ASSERT_GT(run.settled_after, 0);
  EXPECT_LE(run.settled_after, 24);
  const double optimum = session.gpu / (session.gpu + session.cpu);  // 0.614
  EXPECT_NEAR(split.share(), optimum, 1.0 / 16);
  EXPECT_GE(run.tail_rate, 0.95 * session.Best());
  EXPECT_NEAR(split.cpu_alone(), session.Rate(0), 1e-9);
  EXPECT_GT(run.tail_rate, 2 * split.cpu_alone());
}

TEST(EngineSplit, AnEngineThatCostsTheRestMoreThanItGivesIsNotUsed) {
  for (const auto& [gpu, cost] : {std::pair{15000.0, 4e-4}, {200.0, 0.0}, {0.0, 0.0}}) {
    Session session;
    session.gpu = gpu;
    session.cost = cost;
    EngineSplit split;
    const Rounds run = RunRounds(split, session, 60, 32);
    ASSERT_GT(run.settled_after, 0) << gpu;
    EXPECT_EQ(split.share(), 0) << gpu;
    EXPECT_NEAR(run.tail_rate, session.Rate(0), 1e-6 * session.Rate(0)) << gpu;
    EXPECT_LE(run.settled_after, 12) << gpu << ": rounds spent on a losing engine";
  }
}

// A gain within the tolerance is not worth the engine: the CPU alone.
TEST(EngineSplit, AGainWithinTheToleranceKeepsTheCpuAlone) {
  EngineSplit split;
  for (int r = 0; r < 60; ++r) {
    const double gain = 1 + 0.02 * std::sin(3.14159265 * split.share());  // +2% at 1/2.
    split.Observe(8, 8 / (30 * gain));
  }
  EXPECT_EQ(split.phase(), EngineSplit::Phase::kSettled);
  EXPECT_EQ(split.share(), 0);
}

// One slow round (a pause in the trainer) is not a change; two are.
TEST(EngineSplit, OneSlowRoundIsNotAChangeAndBadRoundsAreIgnored) {
  Session session;
  EngineSplit split;
  RunRounds(split, session, 40);
  ASSERT_EQ(split.phase(), EngineSplit::Phase::kSettled);
  const double kept = split.share();
  split.Observe(8, 4 * session.Seconds(kept, 8));
  split.Observe(8, session.Seconds(kept, 8));
  EXPECT_EQ(split.phase(), EngineSplit::Phase::kSettled);
  for (double seconds : {std::numeric_limits<double>::infinity(), 1e-320, -1.0}) {
    split.Observe(8, seconds);
  }
  EXPECT_EQ(split.phase(), EngineSplit::Phase::kSettled);
  EXPECT_EQ(split.share(), kept);
  split.Observe(8, 4 * session.Seconds(kept, 8));
  split.Observe(8, 4 * session.Seconds(kept, 8));
  EXPECT_EQ(split.phase(), EngineSplit::Phase::kBaseline) << "measured afresh";
  // Options out of reach are bounded: a climb of step 0 still ends.
  EngineSplitOptions odd;
  odd.min_step = 0;
  odd.first_step = 7;
  EngineSplit bounded(odd);
  Session other;
  EXPECT_GT(RunRounds(bounded, other, 200).settled_after, 0);
}

TEST(EngineSplit, AHintStartsAtTheEnginesBalance) {
  Session session;
  EngineSplit hinted;
  hinted.Hint(session.cpu, session.gpu);
  hinted.Observe(8, session.Seconds(0, 8));  // The CPU alone.
  EXPECT_NEAR(hinted.share(), session.gpu / (session.gpu + session.cpu), 1e-12);
  Session again;
  const Rounds with = RunRounds(hinted, again, 40);
  Session plain_session;
  EngineSplit plain;
  const Rounds without = RunRounds(plain, plain_session, 40);
  ASSERT_GT(with.settled_after, 0);
  ASSERT_GT(without.settled_after, 0);
  EXPECT_LE(with.settled_after, without.settled_after);
  EXPECT_GE(with.tail_rate, 0.95 * session.Best());
  // Nonsense hints change nothing.
  EngineSplit odd;
  odd.Hint(std::nan(""), 5);
  odd.Hint(-1, 5);
  odd.Hint(5, 0);
  odd.Observe(8, 1);
  EXPECT_EQ(odd.share(), 0.5);
}

TEST(EngineSplit, ItFollowsAnEngineThatAnotherSessionSharesLater) {
  Session session;
  EngineSplitOptions options;
  options.recheck_rounds = 64;  // Past every phase below but the last.
  EngineSplit split(options);
  RunRounds(split, session, 40);
  ASSERT_EQ(split.phase(), EngineSplit::Phase::kSettled);
  session.gpu = 3000;  // Another trainer's session takes most of the engine.
  const Rounds run = RunRounds(split, session, 40);
  EXPECT_EQ(split.phase(), EngineSplit::Phase::kSettled);
  EXPECT_NEAR(split.share(), 3000 / (3000 + session.cpu), 1.0 / 16);
  EXPECT_GE(run.tail_rate, 0.95 * session.Best());
  session.gpu = 0;  // Then all of it: the CPU alone again.
  RunRounds(split, session, 40);
  EXPECT_EQ(split.share(), 0);
  // Freed again: found at the next periodic recheck.
  session.gpu = 15000;
  RunRounds(split, session, options.recheck_rounds + 30);
  EXPECT_NEAR(split.share(), 15000 / (15000 + session.cpu), 1.0 / 16);
}

TEST(EngineSplit, NoisyRoundsNeitherLoseToTheCpuAloneNorStrayFar) {
  for (int seed = 1; seed <= 20; ++seed) {
    Session useful;
    useful.noise = 0.02;
    useful.rng.seed(seed);
    EngineSplit split;
    const Rounds run = RunRounds(split, useful, 60, 16);
    EXPECT_NEAR(split.share(), useful.gpu / (useful.gpu + useful.cpu), 0.1) << seed;
    EXPECT_GE(run.tail_rate, 0.9 * useful.Best()) << seed;
    Session useless;
    useless.noise = 0.02;
    useless.cost = 4e-4;
    useless.rng.seed(seed);
    EngineSplit cpu;
    const Rounds alone = RunRounds(cpu, useless, 60, 16);
    EXPECT_EQ(cpu.share(), 0) << seed;
    EXPECT_GE(alone.tail_rate, 0.97 * useless.Rate(0)) << seed;
  }
}

TEST(EngineSplit, ADisabledEngineIsTheCpuAloneForGood) {
  EngineSplit split;
  split.Observe(8, 1);
  EXPECT_GT(split.share(), 0);
  split.Disable("no CUDA driver (libcuda.so.1 not found)");
  EXPECT_EQ(split.phase(), EngineSplit::Phase::kDisabled);
  EXPECT_EQ(split.disabled_why(), "no CUDA driver (libcuda.so.1 not found)");
  for (int i = 0; i < 100; ++i) {
    split.Observe(8, 0.001);
    EXPECT_EQ(split.share(), 0);
  }
  // Rounds of nothing are not measurements.
  EngineSplit idle;
  idle.Observe(0, 1);
  idle.Observe(8, 0);
  idle.Observe(8, std::nan(""));
  EXPECT_EQ(idle.phase(), EngineSplit::Phase::kBaseline);
}

}  // namespace
}  // namespace stoker
