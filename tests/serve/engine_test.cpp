// The serving engine on the CPU with the tiny fixture models: a job gives what the pipeline gives alone,
// jobs batched across requests give the same, and the queue's rules (limits, cancellation, model
// changes, stop) hold.
#include "serve/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <set>
#include <thread>

#include "core/error.h"
#include "fixture_util.h"
#include "io/model_source.h"
#include "io/png.h"
#include "pipeline/expert_ensemble.h"
#include "pipeline/init_image.h"
#include "pipeline/run_company.h"
#include "test_util.h"

namespace hd::serve {
namespace {

using namespace std::chrono_literals;

const std::string kModels = std::string(HD_SOURCE_DIR) + "/tests/fixtures/models/";

EngineOptions options(bool batch = true, size_t max_queue = 64) {
  EngineOptions o;
  o.catalogue = ModelCatalogue::from({kModels + "tiny_sd1", kModels + "tiny_sd2"}, std::nullopt);
  o.batch_across_jobs = batch;
  o.max_queue = max_queue;
  return o;
}

// A request's picture size: 32x32 (the tiny models' latents 16x16). What the tests check does not
// depend on it, and their time does: at 64x64 the tiny UNet's 1024-token attention was most of it.
constexpr int kSize = 32;

// A kSize x kSize request with Euler a, which draws noise from the job's generator each step.
GenerationParams job_params(const char* prompt, uint64_t seed, int steps = 4, float cfg = 7.5f) {
  return test::company_params(prompt, seed, cfg, SamplerKind::kEulerAncestral, steps, kSize);
}

JobRequest request_of(const GenerationParams& p) {
  JobRequest r;
  r.params = p;
  return r;
}

JobRequest request(const char* prompt, uint64_t seed, int steps = 4, float cfg = 7.5f) {
  return request_of(job_params(prompt, seed, steps, cfg));
}

std::vector<double> alone(const StableDiffusion& sd, const GenerationParams& p) {
  const std::vector<float> v = test::to_vector(sd.generate(p).image);
  return {v.begin(), v.end()};
}

void expect_error_kind(const Job& job, ErrorKind kind, const std::string& text) {
  try {
    job.wait();
    ADD_FAILURE() << "job " << job.id() << " did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// Jobs submitted together (batched, or one at a time): each image is the one its request gives alone.
void check_jobs(bool batch) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  Engine engine(options(batch));
  const std::vector<GenerationParams> requests = {
      job_params("a red square", 1, 3), job_params("a blue circle", 2, 4, 1.0f), job_params("", 3, 2),
      job_params("a green triangle", 4, 3, 3.0f)};
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenerationParams& p : requests) jobs.push_back(engine.submit(request_of(p)));
  for (size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i));
    const GenerationResult& result = jobs[i]->wait();
    EXPECT_LT(test::relative_l2(result.image, alone(sd, requests[i])), 1e-5);
    const JobProgress p = jobs[i]->progress();
    EXPECT_EQ(p.state, JobState::kDone);
    EXPECT_EQ(p.steps_done, requests[i].steps);
    EXPECT_EQ(p.steps_total, requests[i].steps);
    EXPECT_EQ(jobs[i]->model_name(), "tiny_sd1");
  }
  const Engine::Status s = engine.status();
  EXPECT_EQ(s.finished, 4u);
  EXPECT_EQ(s.unet_rows, 2u * 3 + 1 * 4 + 2 * 2 + 2 * 3);  // every step of every job, once
  if (batch) {
    EXPECT_LT(s.unet_calls, 3u + 4 + 2 + 3) << "no step was shared";
  } else {
    EXPECT_EQ(s.unet_calls, 3u + 4 + 2 + 3);
  }
}

TEST(ServeEngine, BatchedJobsGiveWhatEachGivesAlone) {
  check_jobs(true);
}
TEST(ServeEngine, JobsOneAtATimeGiveWhatEachGivesAlone) {
  check_jobs(false);
}

TEST(ServeEngine, AJobThatJoinsLaterSharesTheRunningJobsSteps) {
  Engine engine(options());
  const auto first = engine.submit(request("a red square", 1, 20));
  while (first->progress().steps_done < 2) std::this_thread::sleep_for(1ms);
  const auto later = engine.submit(request("a blue circle", 2, 4));
  later->wait();
  EXPECT_LT(first->progress().steps_done, 20) << "the later job waited for the first to finish";
  first->wait();
  const Engine::Status s = engine.status();
  EXPECT_LT(s.unet_calls, 24u);
  EXPECT_EQ(s.unet_rows, 2u * 24);
}

TEST(ServeEngine, CancelledJobsEndAndTheOthersGoOn) {
  Engine engine(options(false));
  const auto running = engine.submit(request("a red square", 1, 500));
  const auto queued = engine.submit(request("a blue circle", 2, 500));
  const auto after = engine.submit(request("a green triangle", 3, 2));
  while (running->progress().steps_done < 1) std::this_thread::sleep_for(1ms);
  queued->cancel();
  running->cancel();
  expect_error_kind(*running, ErrorKind::kCancelled, "cancelled");
  expect_error_kind(*queued, ErrorKind::kCancelled, "cancelled");
  EXPECT_LT(running->progress().steps_done, 500);
  EXPECT_EQ(queued->progress().steps_done, 0);
  EXPECT_EQ(after->wait().image.view().dim(1), kSize);
  EXPECT_EQ(after->progress().state, JobState::kDone);
}

// A cancelled job that waits in the queue ends at once, while the running one goes on, and its place
// in the queue is free for the next request (it no longer waits for a worker to look at the queue).
TEST(ServeEngine, ACancelledQueuedJobEndsAtOnceAndFreesItsPlace) {
  Engine engine(options(false, 1));
  const auto running = engine.submit(request("a red square", 1, 1000));
  while (running->progress().steps_done < 1) std::this_thread::sleep_for(1ms);
  const auto queued = engine.submit(request("a blue circle", 2, 1000));
  try {
    (void)engine.submit(request("a green triangle", 3, 2));
    ADD_FAILURE() << "a queue of one took a second job";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBusy) << e.what();
  }
  queued->cancel();
  EXPECT_TRUE(queued->wait_for(0ms)) << "the cancelled job waited for the worker's turn";
  expect_error_kind(*queued, ErrorKind::kCancelled, "cancelled");
  EXPECT_EQ(queued->progress().state, JobState::kCancelled);
  EXPECT_EQ(running->progress().state, JobState::kRunning);
  const Engine::Status s = engine.status();
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.finished, 1u);
  const auto next = engine.submit(request("a green triangle", 3, 2));  // the cancelled job's place
  running->cancel();
  expect_error_kind(*running, ErrorKind::kCancelled, "cancelled");
  EXPECT_EQ(next->wait().image.view().dim(1), kSize);
  EXPECT_EQ(queued->progress().steps_done, 0);
  EXPECT_EQ(engine.status().finished, 3u);
}

TEST(ServeEngine, AFullQueueRefusesWithBusy) {
  Engine engine(options(false, 1));
  std::vector<std::shared_ptr<Job>> accepted;
  std::optional<Error> refusal;
  for (int i = 0; i < 5 && !refusal; ++i) {
    try {
      accepted.push_back(engine.submit(request("a", uint64_t(i), 1000)));
    } catch (const Error& e) {
      refusal = e;
    }
  }
  ASSERT_TRUE(refusal.has_value()) << "five long jobs fitted a queue of one";
  EXPECT_EQ(refusal->kind(), ErrorKind::kBusy);
  EXPECT_NE(std::string(refusal->what()).find("the queue is full (1 generations waiting)"),
            std::string::npos);
  engine.cancel_all();
  for (const auto& job : accepted) expect_error_kind(*job, ErrorKind::kCancelled, "cancelled");
}

TEST(ServeEngine, JobsNameTheirModelAndSelectChangesTheDefault) {
  Engine engine(options());
  EXPECT_EQ(engine.current_model(), "tiny_sd1");
  JobRequest sd2 = request("a", 1, 2);
  sd2.model = "tiny_sd2";
  const auto named = engine.submit(std::move(sd2));
  const auto unnamed = engine.submit(request("a", 1, 2));
  named->wait();
  unnamed->wait();
  EXPECT_EQ(named->model_name(), "tiny_sd2");
  EXPECT_EQ(unnamed->model_name(), "tiny_sd1");
  engine.select_model("tiny_sd2");
  EXPECT_EQ(engine.current_model(), "tiny_sd2");
  const auto now_sd2 = engine.submit(request("a", 1, 2));
  now_sd2->wait();
  EXPECT_EQ(now_sd2->model_name(), "tiny_sd2");
  JobRequest unknown = request("a", 1);
  unknown.model = "/etc/passwd";
  test::expect_error_containing([&] { engine.submit(std::move(unknown)); }, "no model named \"/etc/passwd\"");
  test::expect_error_containing([&] { engine.select_model("nothing"); },
                                "this server has: tiny_sd1, tiny_sd2");
}

TEST(ServeEngine, SelectingTheCurrentModelWaitsForNothingAndAFailedSelectKeepsTheLast) {
  test::TempDir dir;
  dir.write("broken.safetensors", std::string("not a checkpoint"));
  EngineOptions o;
  o.catalogue = ModelCatalogue::from({kModels + "tiny_sd1", (dir.path() / "broken.safetensors").string()},
                                     std::nullopt);
  Engine engine(std::move(o));
  const auto running = engine.submit(request("a", 1, 20));
  while (running->progress().steps_done < 1) std::this_thread::sleep_for(1ms);
  engine.select_model("tiny_sd1");  // clients post the current model before their requests
  EXPECT_LT(running->progress().steps_done, 20) << "the select waited for the running job";
  test::expect_error_containing([&] { engine.select_model("broken.safetensors"); },
                                "while loading the model broken");
  EXPECT_EQ(engine.current_model(), "tiny_sd1");
  EXPECT_EQ(running->wait().image.view().dim(1), kSize);
  const auto after = engine.submit(request("b", 2, 2));
  after->wait();
  EXPECT_EQ(after->model_name(), "tiny_sd1");
  const JobProgress ended = after->progress();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(after->progress().seconds_running, ended.seconds_running) << "an ended job's time kept running";
}

// Two workers (two CPU "devices", each with its own copy of the model) take jobs from one queue: both
// work, each job gives what it gives alone, and a model change reaches both.
TEST(ServeEngine, TwoWorkersShareTheQueueAndGiveWhatEachGivesAlone) {
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  EngineOptions o = options();
  o.devices = {Device::cpu(), Device::cpu()};
  Engine engine(std::move(o));
  EXPECT_EQ(engine.devices().size(), 2u);
  std::vector<GenerationParams> requests;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    requests.push_back(
        test::company_params("a red square", seed, 7.5f, SamplerKind::kEulerAncestral, 2, kSize));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const GenerationParams& p : requests) jobs.push_back(engine.submit(request_of(p)));
  std::set<int> workers;
  for (size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i));
    EXPECT_LT(test::relative_l2(jobs[i]->wait().image, alone(sd, requests[i])), 1e-5);
    workers.insert(jobs[i]->worker());
  }
  EXPECT_EQ(workers, (std::set<int>{0, 1})) << "a worker was left idle";
  const Engine::Status s = engine.status();
  EXPECT_EQ(s.finished, 4u);
  EXPECT_EQ(s.unet_rows, 4u * 2 * 2);
  EXPECT_EQ(s.loaded, (std::vector<std::string>{"tiny_sd1", "tiny_sd1"}));
  engine.select_model("tiny_sd2");
  EXPECT_EQ(engine.status().loaded, (std::vector<std::string>{"tiny_sd2", "tiny_sd2"})) << "a worker kept the last";
  const auto a = engine.submit(request("a", 1, 2)), b = engine.submit(request("b", 2, 2));
  a->wait();
  b->wait();
  EXPECT_EQ(a->model_name(), "tiny_sd2");
  EXPECT_EQ(b->model_name(), "tiny_sd2");
}

TEST(ServeEngine, AFailedSelectOnSeveralWorkersKeepsTheLastModel) {
  test::TempDir dir;
  dir.write("broken.safetensors", std::string("not a checkpoint"));
  EngineOptions o;
  o.catalogue = ModelCatalogue::from({kModels + "tiny_sd1", (dir.path() / "broken.safetensors").string()},
                                     std::nullopt);
  o.devices = {Device::cpu(), Device::cpu()};
  Engine engine(std::move(o));
  engine.select_model("tiny_sd1");
  test::expect_error_containing([&] { engine.select_model("broken.safetensors"); },
                                "while loading the model broken.safetensors on cpu");
  EXPECT_EQ(engine.current_model(), "tiny_sd1");
  const auto after = engine.submit(request("b", 2, 2));
  EXPECT_EQ(after->wait().image.view().dim(1), kSize);
  EXPECT_EQ(after->model_name(), "tiny_sd1");
}

TEST(ServeEngine, TheDevicesAreOfOneKind) {
  EngineOptions o = options();
  o.devices = {Device::cpu(), Device{DeviceType::kCuda, 0}};
  test::expect_error_containing([&] { Engine engine(std::move(o)); }, "is not a cpu device");
}

TEST(ServeEngine, BadRequestsAreRefusedOrFailAlone) {
  Engine engine(options());
  JobRequest steps = request("a", 1, 0);
  test::expect_error_containing([&] { engine.submit(std::move(steps)); }, "steps must be between 1 and 1000");
  JobRequest sdxl_only = request("a", 1);
  sdxl_only.params.sizes.original_size = std::array<int, 2>{512, 512};
  const auto failing = engine.submit(std::move(sdxl_only));
  const auto fine = engine.submit(request("b", 2, 2));
  expect_error_kind(*failing, ErrorKind::kInvalidInput, "size conditioning");
  EXPECT_EQ(fine->wait().image.view().dim(0), 1);
}

// SDXL's refiner through the engine: a job with a refiner gives generate_with_refiner's picture, batched
// with another refiner job (their model shares share UNet batches; the one whose share ends first goes on
// alone on the refiner), and a plain job of the same model queued behind them (it waits: a worker batches
// jobs of one model and refiner) gives the model's, each with its progress over its shares.
TEST(ServeEngine, ARefinerJobGivesTheExpertEnsemblesPicture) {
  const std::string base_path = kModels + "tiny_sdxl_pipeline", refiner_path = kModels + "tiny_sdxl_refiner";
  const StableDiffusion base = StableDiffusion::load(base_path, std::nullopt);
  const StableDiffusion refiner = StableDiffusion::load(refiner_path, std::nullopt);
  EngineOptions o;
  o.catalogue = ModelCatalogue::from({base_path, refiner_path, kModels + "tiny_sd1"}, std::nullopt);
  Engine engine(std::move(o));
  const auto refined = [](const char* prompt, uint64_t seed, int steps, double switch_at) {
    JobRequest r = request_of(job_params(prompt, seed, steps));
    r.refiner = "tiny_sdxl_refiner";
    r.refiner_switch_at = switch_at;
    return r;
  };
  std::vector<JobRequest> requests;  // (move-only: an init image is an OwnedTensor)
  requests.push_back(refined("a red square", 1, 5, 0.8));
  requests.push_back(refined("a blue circle", 2, 4, 0.5));
  requests.push_back(request("a green triangle", 3, 3));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const JobRequest& r : requests) {
    JobRequest copy = request_of(r.params);
    copy.refiner = r.refiner;
    copy.refiner_switch_at = r.refiner_switch_at;
    jobs.push_back(engine.submit(std::move(copy)));
  }
  int64_t steps = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i));
    const JobRequest& r = requests[i];
    const GenerationResult& result = jobs[i]->wait();
    const bool with_refiner = !r.refiner.empty();
    const GenerationResult expected =
        with_refiner ? generate_with_refiner(base, refiner, r.params, r.refiner_switch_at)
                     : base.generate(r.params);
    const std::vector<float> v = test::to_vector(expected.image);
    EXPECT_LT(test::relative_l2(result.image, std::vector<double>(v.begin(), v.end())), 1e-5);
    EXPECT_EQ(jobs[i]->model_name(), "tiny_sdxl_pipeline");
    EXPECT_EQ(jobs[i]->refiner_name(), with_refiner ? "tiny_sdxl_refiner" : "");
    const JobProgress p = jobs[i]->progress();
    EXPECT_EQ(p.state, JobState::kDone);
    int total = r.params.steps;
    if (with_refiner) {
      const RefinerShares shares = refiner_shares(base, refiner, r.params, r.refiner_switch_at, false);
      EXPECT_GT(shares.base_steps, 0);
      EXPECT_GT(shares.refiner_steps, 0);
      total = shares.base_steps + shares.refiner_steps;
    }
    EXPECT_EQ(p.steps_total, total);
    EXPECT_EQ(p.steps_done, total);
    steps += total;
  }
  // Every step of every job once, two rows each under guidance.
  EXPECT_EQ(engine.status().unet_rows, uint64_t(2 * steps));
}

// An img2img refiner job whose strength starts below the switch: the refiner's alone, as
// generate_with_refiner makes it, with the refiner's steps only.
TEST(ServeEngine, ARefinerImg2ImgBelowTheSwitchIsTheRefinersAlone) {
  const std::string base_path = kModels + "tiny_sdxl_pipeline", refiner_path = kModels + "tiny_sdxl_refiner";
  const StableDiffusion base = StableDiffusion::load(base_path, std::nullopt);
  const StableDiffusion refiner = StableDiffusion::load(refiner_path, std::nullopt);
  EngineOptions o;
  o.catalogue = ModelCatalogue::from({base_path, refiner_path}, std::nullopt);
  Engine engine(std::move(o));
  OwnedTensor init = init_image_of(read_png(kModels + "img2img_init.png"));  // 24x32
  GenerationParams p = job_params("a red square", 3, 10);
  p.width = 24;
  p.height = 32;
  p.strength = 0.25;
  const GenerationResult expected = generate_with_refiner(base, refiner, p, 0.8, {}, &init.view());
  JobRequest r = request_of(p);
  r.init_image = std::move(init);
  r.refiner = "tiny_sdxl_refiner";
  r.refiner_switch_at = 0.8;
  const auto job = engine.submit(std::move(r));
  EXPECT_LT(test::relative_l2(job->wait().image, test::as_reference(expected.image)), 1e-5);
  EXPECT_EQ(job->progress().steps_total, 2);
  EXPECT_EQ(job->progress().steps_done, 2);
}

// A refiner's rules: its name from the catalogue and its switch in (0, 1) at submit; a pair of models that
// is not an SDXL base and its refiner fails that job alone when it starts, naming the rule.
TEST(ServeEngine, RefinerRequestsThatCannotRunAreRefusedOrFailAlone) {
  EngineOptions o;
  o.catalogue = ModelCatalogue::from(
      {kModels + "tiny_sdxl_pipeline", kModels + "tiny_sdxl_refiner", kModels + "tiny_sd1"}, std::nullopt);
  Engine engine(std::move(o));
  const auto with = [](const char* model, const char* refiner, double switch_at = 0.8) {
    JobRequest r = request("a", 1, 3);
    r.model = model;
    r.refiner = refiner;
    r.refiner_switch_at = switch_at;
    return r;
  };
  test::expect_error_containing([&] { engine.submit(with("", "/etc/passwd")); },
                                "no model named \"/etc/passwd\"");
  for (const double edge : {0.0, 1.0})
    test::expect_error_containing(
        [&] { engine.submit(with("", "tiny_sdxl_refiner", edge)); },
        "the refiner's switch (the base model's share of the schedule) must be in (0, 1)");
  const auto sd1 = engine.submit(with("tiny_sd1", "tiny_sdxl_refiner"));
  const auto swapped = engine.submit(with("tiny_sdxl_refiner", "tiny_sdxl_pipeline"));
  const auto fine = engine.submit(with("tiny_sdxl_pipeline", "tiny_sdxl_refiner"));
  expect_error_kind(*sd1, ErrorKind::kInvalidInput, "a base and its refiner are SDXL models");
  expect_error_kind(*swapped, ErrorKind::kInvalidInput, "the base model is an SDXL refiner");
  EXPECT_EQ(fine->wait().image.view().dim(1), kSize);
}

// keep_models: requests alternating between models load each once while they fit, the least recently
// used goes when another is needed, a refiner stays with its model, and the pictures are those of a
// worker that loads each model afresh.
TEST(ServeEngine, KeptModelsAreLoadedOnceAndTheLeastRecentlyUsedGoesFirst) {
  const StableDiffusion sd1 = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  const StableDiffusion sd2 = StableDiffusion::load(kModels + "tiny_sd2", std::nullopt);
  const auto run_on = [](Engine& engine, const char* model, uint64_t seed) {
    JobRequest r = request("a red square", seed, 2);
    r.model = model;
    const auto job = engine.submit(std::move(r));
    job->wait();
    return job;
  };
  const auto picture = [](const std::shared_ptr<Job>& job) { return job->wait().image.view(); };
  for (const int keep : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "keep_models " << keep);
    EngineOptions o = options();
    o.catalogue = ModelCatalogue::from({kModels + "tiny_sd1", kModels + "tiny_sd2", kModels + "tiny_sdxl_pipeline",
                                        kModels + "tiny_sdxl_refiner"},
                                       std::nullopt);
    o.keep_models = keep;
    Engine engine(std::move(o));
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const bool first = seed % 2 == 1;
      const auto job = run_on(engine, first ? "tiny_sd1" : "tiny_sd2", seed);
      const GenerationParams p = job_params("a red square", seed, 2);
      EXPECT_LT(test::relative_l2(picture(job), alone(first ? sd1 : sd2, p)), 1e-5) << "seed " << seed;
    }
    EXPECT_EQ(engine.status().model_loads, keep == 1 ? 4u : 2u);
    using Names = std::vector<std::string>;
    EXPECT_EQ(engine.status().held[0], (keep == 1 ? Names{"tiny_sd2"} : Names{"tiny_sd2", "tiny_sd1"}));
    // sd1 used last: the next model needs room and sd2 goes.
    run_on(engine, "tiny_sd1", 5);
    run_on(engine, "tiny_sdxl_pipeline", 6);
    EXPECT_EQ(engine.status().held[0],
              (keep == 1 ? Names{"tiny_sdxl_pipeline"} : Names{"tiny_sdxl_pipeline", "tiny_sd1"}));
    // A refiner joins its model beyond the limit, and the model it displaces is one the batch does not need.
    JobRequest refined = request("a blue circle", 7, 4);
    refined.model = "tiny_sdxl_pipeline";
    refined.refiner = "tiny_sdxl_refiner";
    engine.submit(std::move(refined))->wait();
    EXPECT_EQ(engine.status().held[0], (Names{"tiny_sdxl_refiner", "tiny_sdxl_pipeline"}));
    EXPECT_EQ(engine.status().loaded[0], "tiny_sdxl_pipeline");
    EXPECT_EQ(engine.status().model_loads, keep == 1 ? 7u : 4u);
  }
  EngineOptions none = options();
  none.keep_models = 0;
  test::expect_error_containing([&] { Engine engine(std::move(none)); }, "keeps at least one model loaded");
}

// A load that runs out of memory while other models are kept drops them (never the batch's refiner) and
// tries once more; with nothing left to drop, the job fails with the out-of-memory error.
TEST(ServeEngine, ALoadOutOfMemoryDropsTheKeptModelsAndTriesOnceMore) {
  EngineOptions o = options();
  o.catalogue = ModelCatalogue::from({kModels + "tiny_sd1", kModels + "tiny_sd2", kModels + "tiny_sdxl_pipeline",
                                      kModels + "tiny_sdxl_refiner"},
                                     std::nullopt);
  o.keep_models = 3;
  // A device with room for `room` models: a load fails while that many are held.
  std::atomic<int> room = 2, attempts = 0;
  Engine* engine_of_loader = nullptr;
  o.loader = [&](const CatalogueEntry& entry, const ops::Placement& placement,
                 std::span<const LoraChoice> loras) {
    ++attempts;
    HD_CHECK_KIND(int(engine_of_loader->status().held[0].size()) < room, ErrorKind::kOutOfMemory,
                  "out of device memory (the test's room for ", int(room), ")");
    return StableDiffusion::load(entry.path, std::nullopt, std::nullopt, placement, loras);
  };
  Engine engine(std::move(o));
  engine_of_loader = &engine;
  const auto run_on = [&](const char* model) {
    JobRequest r = request("a", 1, 2);
    r.model = model;
    return engine.submit(std::move(r));
  };
  const auto held = [&] { return engine.status().held[0]; };
  run_on("tiny_sd1")->wait();
  run_on("tiny_sd2")->wait();
  EXPECT_EQ(held(), (std::vector<std::string>{"tiny_sd2", "tiny_sd1"}));
  EXPECT_EQ(run_on("tiny_sdxl_pipeline")->wait().image.view().dim(1), kSize);
  EXPECT_EQ(attempts, 4) << "the third load was not tried again";
  EXPECT_EQ(held(), (std::vector<std::string>{"tiny_sdxl_pipeline"})) << "the kept models were not dropped";
  // No room even alone: the error reaches the job, and the engine goes on.
  room = 0;
  expect_error_kind(*run_on("tiny_sd1"), ErrorKind::kOutOfMemory, "while loading the model tiny_sd1");
  EXPECT_EQ(attempts, 6);
  room = 2;
  EXPECT_EQ(run_on("tiny_sd1")->wait().image.view().dim(1), kSize);
  // A refiner that finds no room beside its model and a kept one: the kept one goes, never the model.
  EXPECT_EQ(run_on("tiny_sdxl_pipeline")->wait().image.view().dim(1), kSize);
  EXPECT_EQ(held(), (std::vector<std::string>{"tiny_sdxl_pipeline", "tiny_sd1"}));
  JobRequest refined = request("a", 1, 4);
  refined.model = "tiny_sdxl_pipeline";
  refined.refiner = "tiny_sdxl_refiner";
  EXPECT_EQ(engine.submit(std::move(refined))->wait().image.view().dim(1), kSize);
  EXPECT_EQ(attempts, 10);
  EXPECT_EQ(held(), (std::vector<std::string>{"tiny_sdxl_refiner", "tiny_sdxl_pipeline"}));
}

// model_memory: the kept models' weights stay within the bound (the least recently used go first until a
// new one fits), and a model larger than the bound still loads, alone.
TEST(ServeEngine, KeptModelsStayWithinTheirMemory) {
  const auto bytes_of = [](const char* name) {
    return size_t(ModelSource::open(kModels + name).weight_elements()) * sizeof(float);  // the CPU's f32
  };
  const size_t sd1 = bytes_of("tiny_sd1"), sd2 = bytes_of("tiny_sd2"), xl = bytes_of("tiny_sdxl_pipeline");
  EngineOptions o = options();
  o.catalogue = ModelCatalogue::from(
      {kModels + "tiny_sd1", kModels + "tiny_sd2", kModels + "tiny_sdxl_pipeline"}, std::nullopt);
  o.keep_models = 64;
  o.model_memory = sd1 + sd2;
  Engine engine(std::move(o));
  const auto run_on = [&](const char* model) {
    JobRequest r = request("a", 1, 2);
    r.model = model;
    return engine.submit(std::move(r))->wait().image.view().dim(1);
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(run_on("tiny_sd1"), kSize);
  EXPECT_EQ(run_on("tiny_sd2"), kSize);
  EXPECT_EQ(run_on("tiny_sd1"), kSize);
  EXPECT_EQ(engine.status().model_loads, 2u) << "two models within the bound were not both kept";
  EXPECT_EQ(engine.status().held[0], (Names{"tiny_sd1", "tiny_sd2"}));
  EXPECT_EQ(engine.status().held_bytes[0], sd1 + sd2);
  // SDXL's needs room: sd2 (used longest ago) goes, and sd1 too unless both fit.
  EXPECT_EQ(run_on("tiny_sdxl_pipeline"), kSize);
  const bool sd1_stays = sd1 + xl <= sd1 + sd2;
  EXPECT_EQ(engine.status().held[0],
            (sd1_stays ? Names{"tiny_sdxl_pipeline", "tiny_sd1"} : Names{"tiny_sdxl_pipeline"}));
  EXPECT_EQ(engine.status().held_bytes[0], xl + (sd1_stays ? sd1 : 0));

  // A bound below every model: each loads alone, and its jobs run.
  EngineOptions small = options();
  small.keep_models = 64;
  small.model_memory = 1;
  Engine tight(std::move(small));
  for (const char* model : {"tiny_sd1", "tiny_sd2", "tiny_sd1"}) {
    JobRequest r = request("a", 1, 2);
    r.model = model;
    EXPECT_EQ(tight.submit(std::move(r))->wait().image.view().dim(1), kSize);
    EXPECT_EQ(tight.status().held[0], Names{model});
  }
  EXPECT_EQ(tight.status().model_loads, 3u);
  EXPECT_EQ(tight.status().held_bytes[0], sd1);
}

// LoRAs from the engine's LoRA folder, by name: a job with one runs on the model with it merged (the
// picture of StableDiffusion::load with that LoRA), held as a model of its own beside the plain one;
// jobs batch only with jobs of the same LoRAs; unknown names and bad scales are refused at submit.
TEST(ServeEngine, LoraJobsRunOnTheModelWithTheirLoras) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "Lora");
  std::filesystem::copy_file(kModels + "tiny_sd1_lora_kohya.safetensors",
                             dir.path() / "Lora" / "detail.safetensors");
  EngineOptions o = options();
  o.loras = LoraCatalogue::from((dir.path() / "Lora").string());
  o.keep_models = 2;
  Engine engine(std::move(o));
  const auto with_lora = [](const char* prompt, uint64_t seed, float scale) {
    JobRequest r = request(prompt, seed, 3);
    r.loras = {{"detail", scale}};
    return r;
  };
  const auto a = engine.submit(with_lora("a red square", 1, 0.7f));
  const auto plain = engine.submit(request("a red square", 1, 3));
  const auto b = engine.submit(with_lora("a blue circle", 2, 0.7f));
  const LoraChoice lora{(dir.path() / "Lora" / "detail.safetensors").string(), 0.7f};
  const StableDiffusion merged =
      StableDiffusion::load(kModels + "tiny_sd1", std::nullopt, std::nullopt, {}, {&lora, 1});
  const StableDiffusion sd = StableDiffusion::load(kModels + "tiny_sd1", std::nullopt);
  EXPECT_LT(test::relative_l2(a->wait().image, alone(merged, job_params("a red square", 1, 3))), 1e-5);
  EXPECT_LT(test::relative_l2(b->wait().image, alone(merged, job_params("a blue circle", 2, 3))), 1e-5);
  EXPECT_LT(test::relative_l2(plain->wait().image, alone(sd, job_params("a red square", 1, 3))), 1e-5);
  EXPECT_GT(test::relative_l2(a->wait().image, alone(sd, job_params("a red square", 1, 3))), 1e-2);
  EXPECT_EQ(a->model_name(), "tiny_sd1");
  EXPECT_EQ(a->lora_tags(), " <lora:detail:0.7>");
  const std::vector<std::string> held = engine.status().held[0];
  EXPECT_EQ(std::set<std::string>(held.begin(), held.end()),
            (std::set<std::string>{"tiny_sd1", "tiny_sd1 <lora:detail:0.7>"}));
  // Clients post the model before each request: the model with LoRAs running counts as that model
  // loaded, and nothing loads again.
  const uint64_t loads = engine.status().model_loads;
  ASSERT_EQ(engine.status().loaded[0], "tiny_sd1 <lora:detail:0.7>");  // b ran last
  engine.select_model("tiny_sd1");
  EXPECT_EQ(engine.status().model_loads, loads);
  EXPECT_EQ(engine.status().loaded[0], "tiny_sd1 <lora:detail:0.7>") << "the select swapped the model back";
  test::expect_error_containing([&] { engine.submit(with_lora("x", 1, std::nanf(""))); }, "finite");
  JobRequest unknown = request("x", 1);
  unknown.loras = {{"style", 1.0f}};
  test::expect_error_containing([&] { engine.submit(std::move(unknown)); },
                                "no LoRA named \"style\" (this server has: detail)");
  Engine without(options());
  JobRequest asks = request("x", 1);
  asks.loras = {{"detail", 1.0f}};
  test::expect_error_containing([&] { without.submit(std::move(asks)); },
                                "no LoRA files (serve --lora-dir DIR)");
}

// A LoRA made for another model family is refused when it is asked for: at load, the worker would first
// have dropped the model it holds (keep_models 1), and reloaded it for the next request.
TEST(ServeEngine, ALoraThatDoesNotFitTheModelIsRefusedAtSubmit) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "Lora");
  std::filesystem::copy_file(kModels + "tiny_sdxl_lora_kohya.safetensors",
                             dir.path() / "Lora" / "xl.safetensors");
  std::filesystem::copy_file(kModels + "tiny_sd1_lora_kohya.safetensors",
                             dir.path() / "Lora" / "detail.safetensors");
  EngineOptions o = options();
  o.loras = LoraCatalogue::from((dir.path() / "Lora").string());
  Engine engine(std::move(o));
  engine.submit(request("a red square", 1, 2))->wait();
  const uint64_t loads = engine.status().model_loads;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the same answer twice (LoraFitCache's test: kept)
    JobRequest r = request("a red square", 1, 2);
    r.loras = {{"detail", 1.0f}, {"xl", 0.5f}};
    try {
      engine.submit(std::move(r));
      ADD_FAILURE() << "an SDXL LoRA was queued for an SD1.x model";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("LoRA xl does not fit model tiny_sd1"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("another model family"), std::string::npos) << e.what();
    }
  }
  JobRequest named = request("a red square", 1, 2);
  named.model = "tiny_sd2";
  named.loras = {{"xl", 1.0f}};
  test::expect_error_containing([&] { engine.submit(std::move(named)); }, "does not fit model tiny_sd2");
  EXPECT_EQ(engine.status().model_loads, loads);
  EXPECT_EQ(engine.status().loaded[0], "tiny_sd1");
  JobRequest fits = request("a red square", 1, 2);
  fits.loras = {{"detail", 1.0f}};
  EXPECT_EQ(engine.submit(std::move(fits))->wait().image.view().dim(1), kSize);
}

TEST(ServeEngine, StopFinishesAcceptedJobsAndRefusesNewOnes) {
  Engine engine(options());
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(engine.submit(request("a", uint64_t(i), 3)));
  engine.stop();
  for (const auto& job : jobs) EXPECT_EQ(job->progress().state, JobState::kDone);
  try {
    engine.submit(request("a", 9));
    ADD_FAILURE() << "a stopped engine took a job";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBusy);
  }
}

}  // namespace
}  // namespace hd::serve
