// The serving engine behind the HTTP server and the C API: models kept loaded between requests (a model
// is loaded once and serves every job until another is asked for), a bounded queue of jobs, and one
// worker per engine that steps every running job's denoising together (StableDiffusion::step). Jobs of
// the same model and size share each UNet batch even when they arrived at different times and stand at
// different steps (continuous batching); a lone job runs at once and alone. Each job has its own
// progress and can be cancelled; stop() finishes what was accepted and refuses the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ops/placement.h"
#include "pipeline/generation_params.h"
#include "pipeline/stable_diffusion.h"
#include "serve/model_catalogue.h"

namespace hd::serve {

enum class JobState { kQueued, kRunning, kDone, kFailed, kCancelled };
std::string_view job_state_name(JobState state);

struct JobRequest {
  std::string model;  // a catalogue name; empty: the engine's current model
  GenerationParams params;
  std::optional<OwnedTensor> init_image;  // img2img: host f32 [1, H, W, 3] in [-1, 1]
};

struct JobProgress {
  JobState state = JobState::kQueued;
  int steps_done = 0, steps_total = 0;
  double seconds_running = 0;  // since the job started (its prompt's encoding included)
};

class Job {
 public:
  uint64_t id() const { return id_; }
  const JobRequest& request() const { return request_; }
  JobProgress progress() const;
  // A queued job never starts; a running one stops before its next step. wait() then throws an Error of
  // kind kCancelled. Nothing happens to a job that has ended.
  void cancel() { cancel_requested_ = true; }
  bool cancel_requested() const { return cancel_requested_; }
  // Blocks until the job ends: its result, or its error thrown.
  const GenerationResult& wait() const;
  // Whether the job ended within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // The catalogue name of the model that ran (or runs) it; empty while queued.
  std::string model_name() const;

 private:
  friend class Engine;
  Job(uint64_t id, JobRequest request, std::string wanted_model)
      : id_(id), request_(std::move(request)), wanted_model_(std::move(wanted_model)) {}
  void end(JobState state, std::exception_ptr error);
  bool ended_locked() const {
    return state_ == JobState::kDone || state_ == JobState::kFailed || state_ == JobState::kCancelled;
  }

  const uint64_t id_;
  const JobRequest request_;
  const std::string wanted_model_;  // the catalogue's name for request_.model; empty: the current model
  std::atomic<bool> cancel_requested_ = false;
  std::atomic<int> steps_done_ = 0, steps_total_ = 0;
  mutable std::mutex mutex_;
  mutable std::condition_variable ended_;
  JobState state_ = JobState::kQueued;
  std::string model_name_;
  // When the worker started it, and when it ended (unset: not yet).
  std::optional<std::chrono::steady_clock::time_point> started_, ended_at_;
  GenerationResult result_;
  std::exception_ptr error_;
  // The worker's: the job's generator (its seed's stream) and its denoising run while it runs.
  std::unique_ptr<TorchCpuGenerator> generator_;
  std::optional<DenoisingRun> run_;
};

struct EngineOptions {
  ModelCatalogue catalogue;
  ops::Placement placement;  // where every model computes
  size_t max_queue = 64;     // jobs waiting to start, beyond which submit refuses (kBusy)
  // UNet rows one step may hold across jobs (an image under classifier-free guidance is two rows); a job
  // larger than this runs alone. Off (batch_across_jobs false): one job at a time, in order.
  int max_batch_rows = 16;
  bool batch_across_jobs = true;
};

class Engine {
 public:
  // Starts the worker; loads nothing until a job or select_model asks for a model.
  explicit Engine(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a job. Its parameters are checked here against themselves (GenerationParams' validate) and
  // its model name against the catalogue; the model's own rules when it starts (the job then fails).
  // A full queue or a stopping engine: an Error of kind kBusy.
  std::shared_ptr<Job> submit(JobRequest request);
  // Makes `name` the model of jobs that name none, loading it (and unloading the last) once the running
  // jobs of the last one have finished. Blocks until it is loaded; throws its load error.
  void select_model(const std::string& name);
  // The catalogue name of the model that jobs naming none run on.
  std::string current_model() const;
  const ModelCatalogue& catalogue() const { return options_.catalogue; }
  const EngineOptions& options() const { return options_; }

  struct Status {
    size_t queued = 0;
    std::vector<std::shared_ptr<Job>> running;  // in the order they started
    uint64_t finished = 0;                      // jobs that ended, whatever their end
    // UNet calls the worker made, and the rows they held (rows / calls: how well jobs were batched).
    uint64_t unet_calls = 0, unet_rows = 0;
  };
  Status status() const;
  // Cancels every running and queued job (A1111's /interrupt).
  void cancel_all();
  // Refuses new jobs, finishes every accepted one, and ends the worker. Called by the destructor.
  void stop();

 private:
  void work();
  // One turn of the worker: admit, start, step, finish. `admitted`: the jobs it took from the queue (for
  // the worker's clean-up should it throw). False once stopped and drained.
  bool iterate(std::vector<std::shared_ptr<Job>>& active, std::vector<std::shared_ptr<Job>>& admitted);
  // Admits queued jobs into `active` as the batching rules allow; under mutex_.
  std::vector<std::shared_ptr<Job>> admit_locked(const std::vector<std::shared_ptr<Job>>& active);
  const StableDiffusion& model(const std::string& name);  // the worker's: loads it when it is not loaded
  void start(const std::shared_ptr<Job>& job);            // encodes its prompt, makes its starting latents
  void step_all(std::vector<std::shared_ptr<Job>>& active);
  void finish(const std::shared_ptr<Job>& job);
  // Ends `job` (its state, and its error unless done) and counts it.
  void end(const std::shared_ptr<Job>& job, JobState state, std::exception_ptr error = nullptr);
  // Whether a select_model waits for the running jobs to finish (admission pauses meanwhile); under mutex_.
  bool select_pending_locked() const { return select_generation_ != loaded_generation_ && !stopping_; }

  const EngineOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable model_changed_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> running_;  // a copy of the worker's active jobs, for status()
  std::string current_model_;                  // jobs naming none run on it
  std::string loaded_name_;                    // what `loaded_` holds (empty: none)
  std::exception_ptr select_error_;            // the last select_model's load error
  uint64_t select_generation_ = 0, loaded_generation_ = 0;
  uint64_t next_id_ = 1, finished_ = 0, unet_calls_ = 0, unet_rows_ = 0;
  bool stopping_ = false;
  std::unique_ptr<StableDiffusion> loaded_;  // the worker's
  std::thread worker_;
  std::once_flag joined_;
};

}  // namespace hd::serve
