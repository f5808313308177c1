// The scheduler in-process on a golden model: greedy output against
// llama.cpp's, the same tokens alone or among seven other requests and
// whatever the batch size, prefix reuse, cancellation, the queue limit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "server/scheduler.h"

namespace colibri::server {
namespace {

const std::string kModel = "qwen3moe-q8_0";

std::string golden_path(const std::string& ext) {
  return std::string(COLIBRI_SHARED_DIR) + "/golden/" + kModel + ext;
}

std::unique_ptr<Engine> open_engine(int n_seq, int n_batch) {
  EngineOptions o;
  o.model_path = golden_path(".gguf");
  o.n_ctx = 256;
  o.n_seq = n_seq;
  o.n_batch = n_batch;
  o.n_threads = 2;
  o.kv_type = DType::F32;  // as the references were made
  return std::make_unique<Engine>(o);
}

struct Result {
  std::vector<int32_t> ids;
  std::string text;
  Finish finish = Finish::kNone;
  Usage usage;
};

// Submits all at once and waits for every one to finish.
std::vector<Result> run_all(Scheduler& s, std::vector<JobParams> params) {
  std::vector<std::shared_ptr<Job>> jobs;
  for (JobParams& p : params) {
    p.n_logprobs = 0;  // to see the token ids
    jobs.push_back(s.submit(std::move(p)));
    EXPECT_NE(jobs.back(), nullptr);
  }
  std::vector<Result> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::vector<JobEvent> events;
    for (int tries = 0; out[i].finish == Finish::kNone && tries < 600; ++tries) {
      events.clear();
      jobs[i]->wait(events, std::chrono::milliseconds(100));
      for (const JobEvent& e : events) {
        out[i].text += e.text;
        for (const TokenLogprob& lp : e.logprobs) out[i].ids.push_back(lp.id);
        if (e.finish != Finish::kNone) {
          out[i].finish = e.finish;
          out[i].usage = e.usage;
        }
      }
    }
    EXPECT_NE(out[i].finish, Finish::kNone) << "job " << i << " did not finish";
  }
  return out;
}

JobParams greedy(std::vector<int32_t> prompt, int n) {
  JobParams p;
  p.prompt = std::move(prompt);
  p.sampling.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(golden_path(".gguf")))
      GTEST_SKIP() << "golden models not found in " << COLIBRI_SHARED_DIR;
    golden_ = nlohmann::json::parse(std::ifstream(golden_path(".json")));
  }
  std::vector<int32_t> prompt(int c) const { return golden_["cases"][c]["tokens"]; }
  nlohmann::json golden_;
};

// llama.cpp's greedy tokens, up to the first step whose top-2 margin is small
// enough for a different but correct float order to flip (golden/README.md).
TEST_F(SchedulerTest, ConcurrentGreedyRequestsMatchLlamaCpp) {
  auto engine = open_engine(4, 64);
  Scheduler s(*engine, {});
  std::vector<JobParams> params;
  std::vector<std::vector<int32_t>> expect;
  for (const auto& c : golden_["cases"]) {
    std::vector<int32_t> e;
    for (const auto& g : c["gen"]) {
      if (g["margin"].get<double>() < 0.3) break;
      e.push_back(g["id"]);
    }
    if (e.empty()) continue;
    expect.push_back(e);
    params.push_back(greedy(c["tokens"], static_cast<int>(e.size())));
  }
  ASSERT_GE(params.size(), 2u);
  std::vector<Result> r = run_all(s, params);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].ids, expect[i]) << "case " << i;
    EXPECT_EQ(r[i].finish, Finish::kLength);
    EXPECT_EQ(r[i].usage.completion_tokens, static_cast<int>(expect[i].size()));
  }
}

// Each token's math must not depend on what else is in the batch: the same
// request alone, among seven others, and with a small batch (prompts split
// over steps) gives the same tokens, greedy and seeded.
TEST_F(SchedulerTest, SameTokensAloneOrAmongSevenOthersAndAtAnyBatchSize) {
  JobParams target = greedy(prompt(0), 24);
  JobParams seeded = greedy(prompt(3), 24);
  seeded.sampling.temperature = 1.0f;
  seeded.sampling.top_k = 0;
  seeded.sampling.top_p = 1.0f;
  seeded.sampling.min_p = 0.0f;
  seeded.sampling.seed = 1234;

  std::vector<Result> alone;
  {
    auto engine = open_engine(1, 64);
    Scheduler s(*engine, {});
    alone = run_all(s, {target});
    alone.push_back(run_all(s, {seeded})[0]);
  }
  ASSERT_EQ(alone[0].ids.size(), 24u);
  for (int n_batch : {64, 8, 3}) {
    auto engine = open_engine(8, std::max(n_batch, 8));
    Scheduler s(*engine, {});
    std::vector<JobParams> mix;
    for (int i = 0; i < 6; ++i) {
      JobParams p = greedy(prompt((i + 1) % 4), 10 + 3 * i);
      p.prompt.push_back(100 + i);  // different prompts, different lengths
      if (i % 2) p.sampling.temperature = 0.7f;
      mix.push_back(p);
    }
    mix.insert(mix.begin() + 3, target);
    mix.push_back(seeded);
    std::vector<Result> r = run_all(s, mix);
    EXPECT_EQ(r[3].ids, alone[0].ids) << "greedy, batch " << n_batch;
    EXPECT_EQ(r[7].ids, alone[1].ids) << "seeded, batch " << n_batch;
    EXPECT_EQ(r[3].text, alone[0].text);
  }
}

TEST_F(SchedulerTest, SmallBatchStillDecodesAllSequencesAndPrefillsInChunks) {
  // n_batch 8 with 8 slots: prefill gets only what decoding leaves over.
  auto engine = open_engine(8, 8);
  Scheduler s(*engine, {});
  std::vector<JobParams> params;
  for (int i = 0; i < 8; ++i) params.push_back(greedy(prompt(i % 4), 5));
  std::vector<Result> r = run_all(s, params);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r[i].ids.size(), 5u);
    EXPECT_EQ(r[i].ids, r[i % 4].ids);
  }
  SchedulerStats st = s.stats();
  EXPECT_EQ(st.gen_tokens, 40u);
  EXPECT_GT(st.steps, 1u);
}

TEST_F(SchedulerTest, PrefixCacheReusesTheKvOfASharedPrompt) {
  std::vector<int32_t> base = prompt(1);
  std::vector<int32_t> longer = base;
  longer.insert(longer.end(), {11, 12, 13});
  std::vector<Result> fresh;
  {
    auto engine = open_engine(2, 64);
    Scheduler s(*engine, {});
    fresh = run_all(s, {greedy(longer, 12)});
    EXPECT_LE(fresh[0].usage.cached_tokens, 1);  // at most a BOS from nowhere
  }
  auto engine = open_engine(2, 64);
  Scheduler s(*engine, {});
  Result first = run_all(s, {greedy(base, 4)})[0];
  // The same slot's cache: base and its 3 decoded tokens are in the KV.
  Result again = run_all(s, {greedy(base, 4)})[0];
  EXPECT_EQ(again.usage.cached_tokens, static_cast<int>(base.size()) - 1);
  EXPECT_EQ(again.ids, first.ids);
  Result extended = run_all(s, {greedy(longer, 12)})[0];
  EXPECT_EQ(extended.usage.cached_tokens, static_cast<int>(base.size()));
  EXPECT_EQ(extended.ids, fresh[0].ids);
  EXPECT_GE(s.stats().cached_tokens, 2 * base.size() - 1);
}

TEST_F(SchedulerTest, PrefixIsCopiedFromABusySlot) {
  auto engine = open_engine(2, 64);
  Scheduler s(*engine, {});
  std::vector<int32_t> base = prompt(1);
  std::vector<int32_t> other = base;
  other.push_back(7);
  JobParams long_job = greedy(base, 60);
  auto busy = s.submit(long_job);
  std::vector<JobEvent> ev;
  ASSERT_TRUE(busy->wait(ev, std::chrono::seconds(30)));  // it is decoding now
  Result r = run_all(s, {greedy(other, 3)})[0];
  EXPECT_EQ(r.usage.cached_tokens, static_cast<int>(base.size()));
  busy->cancel();
}

TEST_F(SchedulerTest, CancelFreesTheSlot) {
  auto engine = open_engine(1, 64);
  Scheduler s(*engine, {});
  auto job = s.submit(greedy(prompt(0), 200));
  std::vector<JobEvent> ev;
  ASSERT_TRUE(job->wait(ev, std::chrono::seconds(30)));
  job->cancel();
  Finish f = Finish::kNone;
  for (int i = 0; i < 100 && f == Finish::kNone; ++i) {
    ev.clear();
    job->wait(ev, std::chrono::milliseconds(100));
    for (const JobEvent& e : ev) f = e.finish == Finish::kNone ? f : e.finish;
  }
  EXPECT_EQ(f, Finish::kCancelled);
  EXPECT_EQ(s.stats().jobs_cancelled, 1u);
  Result next = run_all(s, {greedy(prompt(2), 3)})[0];
  EXPECT_EQ(next.ids.size(), 3u);
}

TEST_F(SchedulerTest, RefusesPastTheQueueLimit) {
  auto engine = open_engine(1, 64);
  Scheduler s(*engine, SchedulerOptions{1});
  auto a = s.submit(greedy(prompt(0), 200));
  auto b = s.submit(greedy(prompt(1), 200));  // one slot + one in the queue
  auto c = s.submit(greedy(prompt(2), 200));
  auto d = s.submit(greedy(prompt(3), 200));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(c == nullptr || d == nullptr);
  for (auto& j : {a, b, c, d})
    if (j) j->cancel();
}

TEST_F(SchedulerTest, StopStringsAndEndOfContext) {
  auto engine = open_engine(1, 64);
  Scheduler s(*engine, {});
  Result plain = run_all(s, {greedy(prompt(0), 12)})[0];
  ASSERT_GT(plain.text.size(), 6u);
  JobParams p = greedy(prompt(0), 12);
  // The second and third characters (UTF-8 lead bytes are not 10xxxxxx).
  std::vector<size_t> starts;
  for (size_t i = 0; i < plain.text.size(); ++i)
    if ((static_cast<unsigned char>(plain.text[i]) & 0xC0) != 0x80) starts.push_back(i);
  ASSERT_GE(starts.size(), 4u);
  const std::string stop = plain.text.substr(starts[1], starts[3] - starts[1]);
  p.stop = {stop};
  Result cut = run_all(s, {p})[0];
  EXPECT_EQ(cut.finish, Finish::kStop);
  EXPECT_EQ(cut.text, plain.text.substr(0, plain.text.find(stop)));
  // No max_tokens: generation ends when the context (256) is full.
  Result full = run_all(s, {greedy(prompt(0), -1)})[0];
  EXPECT_EQ(full.finish, Finish::kLength);
  EXPECT_EQ(full.usage.prompt_tokens + full.usage.completion_tokens, 256 + 1);
}

}  // namespace
}  // namespace colibri::server
