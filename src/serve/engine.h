// The serving engine behind the HTTP server and the C API: models kept loaded between requests (a model
// is loaded once and serves every job while it is kept: keep_models), a bounded queue of jobs, and one
// worker per device that steps every job it runs together (StableDiffusion::step). Jobs of the same model
// and size share each UNet batch even when they arrived at different times and stand at different steps
// (continuous batching); a lone job runs at once and alone. With several devices each worker holds its
// own copy of the model and takes jobs from the one queue, an idle worker first (data parallel across
// requests). Each job has its own progress and can be cancelled; stop() finishes what was accepted and
// refuses the rest. A job may name SDXL's refiner: the worker then holds it beside its model, steps the
// job's model share in the model's batches and its refiner share in the refiner's, and the refiner's VAE
// decodes (the expert ensemble of generate_with_refiner, batched across requests). A worker keeps up to
// keep_models models loaded (the least recently used goes first), so that requests alternating between
// models do not load them again each time; model_memory bounds them by their weights' bytes instead or
// as well.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ops/placement.h"
#include "pipeline/expert_ensemble.h"
#include "pipeline/generation_params.h"
#include "pipeline/stable_diffusion.h"
#include "serve/lora_catalogue.h"
#include "serve/lora_fit.h"
#include "serve/model_catalogue.h"

namespace hd::serve {

enum class JobState { kQueued, kRunning, kDone, kFailed, kCancelled };
std::string_view job_state_name(JobState state);

// A LoRA a job asks for: a LoraCatalogue name (A1111's <lora:NAME:SCALE>) and its scale.
struct LoraRequest {
  std::string name;
  float scale = 1.0f;  // the text encoders', and the UNet's without unet_scale
  std::optional<float> unet_scale =
      std::nullopt;  // the UNet's, when it has its own (A1111's <lora:NAME:TE:UNET>)
};

struct JobRequest {
  std::string model;  // a catalogue name; empty: the engine's current model
  // LoRAs merged into the model's weights, in order: the model with them is a model of its own, loaded
  // and kept as any other (jobs batch only with jobs of the same LoRAs at the same scales).
  GenerationParams params;
  std::optional<OwnedTensor> init_image;  // img2img: host f32 [1, H, W, 3] in [-1, 1]
  // SDXL's refiner, a catalogue name (empty: none): the model denoises the first refiner_switch_at of
  // the schedule by noise level (diffusers' high_noise_frac, A1111's switch by timestep) and the refiner
  // the rest from its latents (generate_with_refiner, a step at a time).
  std::string refiner;
  double refiner_switch_at = 0.8;
  std::vector<LoraRequest> loras;
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
  // A queued job ends at once and never starts (it holds no place in the queue from then on); a running
  // one stops before its next step. wait() then throws an Error of kind kCancelled. Nothing happens to a
  // job that has ended.
  void cancel();
  bool cancel_requested() const { return cancel_requested_; }
  // Blocks until the job ends: its result, or its error thrown.
  const GenerationResult& wait() const;
  // Whether the job ended within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // The catalogue name of the model that ran (or runs) it; empty while queued.
  std::string model_name() const;
  // Its LoRAs as A1111's tags (" <lora:NAME:SCALE>" each, in order; empty: none).
  const std::string& lora_tags() const { return lora_tags_; }
  // The catalogue name of its refiner (empty: none).
  const std::string& refiner_name() const { return wanted_refiner_; }
  // The index, in the engine's devices, of the worker that ran (or runs) it; -1 while queued.
  int worker() const;

 private:
  friend class Engine;
  Job(uint64_t id, JobRequest request, std::string wanted_model, std::string wanted_refiner,
      std::vector<LoraChoice> loras, std::string lora_tags)
      : id_(id),
        request_(std::move(request)),
        wanted_model_(std::move(wanted_model)),
        wanted_refiner_(std::move(wanted_refiner)),
        loras_(std::move(loras)),
        lora_tags_(std::move(lora_tags)) {}
  void end(JobState state, std::exception_ptr error);
  // Ends the job as cancelled, and wakes its waiters, unless it has ended or a worker has taken it.
  void end_if_queued();
  bool ended_locked() const {
    return state_ == JobState::kDone || state_ == JobState::kFailed || state_ == JobState::kCancelled;
  }

  const uint64_t id_;
  const JobRequest request_;
  const std::string wanted_model_;  // the catalogue's name for request_.model; empty: the current model
  const std::string wanted_refiner_;  // the catalogue's name for request_.refiner; empty: none
  const std::vector<LoraChoice> loras_;  // request_.loras' files (the LoRA catalogue's)
  const std::string lora_tags_;
  std::atomic<bool> cancel_requested_ = false;
  std::atomic<int> steps_done_ = 0, steps_total_ = 0;
  mutable std::mutex mutex_;
  mutable std::condition_variable ended_;
  JobState state_ = JobState::kQueued;
  std::string model_name_;
  std::string model_key_;  // model_name_ and lora_tags_: what the worker holds it as (set with model_name_)
  int worker_ = -1;  // set under mutex_ when a worker takes the job (a cancel() after that leaves it to it)
  // When the worker started it, and when it ended (unset: not yet).
  std::optional<std::chrono::steady_clock::time_point> started_, ended_at_;
  GenerationResult result_;
  std::exception_ptr error_;
  // The worker's: the job's generator (its seed's stream) and its denoising run while it runs; with a
  // refiner, each model's share, whether the refiner's run has taken over, and the stage times so far.
  std::unique_ptr<TorchCpuGenerator> generator_;
  std::optional<DenoisingRun> run_;
  std::optional<RefinerShares> shares_;
  bool refining_ = false;
  StageTimes times_;
};

struct EngineOptions {
  ModelCatalogue catalogue;
  LoraCatalogue loras;       // the LoRAs jobs may ask for
  ops::Placement placement;  // where every model computes
  // Several devices of placement's kind, each with a worker and a copy of the model (placement's dtype);
  // empty: placement's device alone.
  std::vector<Device> devices;
  size_t max_queue = 64;     // jobs waiting to start, beyond which submit refuses (kBusy)
  // UNet rows one step may hold across jobs (an image under classifier-free guidance is two rows); a job
  // larger than this runs alone. Off (batch_across_jobs false): one job at a time, in order.
  int max_batch_rows = 16;
  bool batch_across_jobs = true;
  // Models each worker keeps loaded (A1111's sd_checkpoints_limit): when a job needs one more, the least
  // recently used goes first. The model and refiner a batch needs are kept together beyond it. A load
  // that runs out of memory (device or host) drops every model the batch does not need, then tries once
  // more.
  int keep_models = 1;
  // Bytes the models a worker keeps may take together (their weights in the placement's dtype, as their
  // files tell before they load: ModelSource::weight_elements, and on a GPU the upsamplers' phases,
  // gpu_extra_weight_elements); 0: no bound but keep_models. Before a
  // load, the least recently used others go until the new one fits. The models a batch needs are held
  // whatever their size: a model larger than the bound still loads, alone.
  size_t model_memory = 0;
  // How a worker loads a model with LoRAs (empty: StableDiffusion::load of the entry's path on the
  // placement). Tests count loads or make them fail through it.
  std::function<StableDiffusion(const CatalogueEntry&, const ops::Placement&, std::span<const LoraChoice>)>
      loader;
};

class Engine {
 public:
  // Starts the workers; loads nothing until a job or select_model asks for a model.
  explicit Engine(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a job. Its parameters are checked here against themselves (GenerationParams' validate), its
  // model's and refiner's names against the catalogue, the refiner's switch in (0, 1), its LoRAs' names
  // against theirs and their layers against the model's weights (LoraFitCache); the models' own rules
  // when it starts (the job then fails: a refiner of a model that is not SDXL's, say).
  // A full queue or a stopping engine: an Error of kind kBusy.
  std::shared_ptr<Job> submit(JobRequest request);
  // Makes `name` the model of jobs that name none, loading it (and unloading the least recently used past
  // keep_models) once the running jobs of the last one have finished. Blocks until it is loaded; throws
  // its load error.
  void select_model(const std::string& name);
  // The catalogue name of the model that jobs naming none run on.
  std::string current_model() const;
  const ModelCatalogue& catalogue() const { return options_.catalogue; }
  const EngineOptions& options() const { return options_; }
  // The devices the workers run on, in order.
  std::vector<Device> devices() const;

  struct Status {
    size_t queued = 0;
    std::vector<std::shared_ptr<Job>> running;  // in the order they started
    uint64_t finished = 0;                      // jobs that ended, whatever their end
    // UNet calls the worker made, and the rows they held (rows / calls: how well jobs were batched).
    uint64_t unet_calls = 0, unet_rows = 0;
    // The model each device's worker runs (empty: none), in device order: its name, then its LoRAs' tags.
    std::vector<std::string> loaded;
    // Every model each device's worker holds (its refiner and kept ones too; names then LoRA tags), most
    // recently used first.
    std::vector<std::vector<std::string>> held;
    // The bytes of each device's held models' weights (counted when model_memory is set, else 0).
    std::vector<size_t> held_bytes;
    uint64_t model_loads = 0;  // models loaded so far, on every worker together
  };
  Status status() const;
  // Cancels every running and queued job (A1111's /interrupt).
  void cancel_all();
  // Refuses new jobs, finishes every accepted one, and ends the workers. Called by the destructor.
  void stop();

 private:
  // A model as a worker loads it: a catalogue name, the LoRAs merged into it, and what it is held as
  // (the name, then the LoRAs' tags).
  struct ModelChoice {
    std::string name;
    std::vector<LoraChoice> loras;
    std::string key;
  };
  static ModelChoice plain(const std::string& name) { return {name, {}, name}; }
  // A model a worker holds, and when it last served a batch (the least recently used is dropped first).
  struct HeldModel {
    std::string name;  // its ModelChoice's key
    std::unique_ptr<StableDiffusion> model;
    uint64_t last_used = 0;
    size_t bytes = 0;  // its weights (counted when model_memory is set)
  };
  // A device's worker: its thread, its models, and what the others and the callers see of it.
  struct Worker {
    int index = 0;
    ops::Placement placement;
    std::vector<HeldModel> held;  // the worker thread's: its model, a refiner, the kept ones
    uint64_t uses = 0;            // the clock of last_used
    std::string
        loaded_name;  // the key of the model its jobs run on, one of `held` (empty: none); under mutex_
    std::string loaded_model;             // that model's catalogue name, without its LoRAs; under mutex_
    std::vector<std::string> held_names;  // `held`'s names, most recently used first; under mutex_
    size_t held_bytes = 0;                // `held`'s bytes; under mutex_
    uint64_t loaded_generation = 0;       // the last select_model it has carried out; under mutex_
    std::vector<std::shared_ptr<Job>> running;  // a copy of its active jobs, for status(); under mutex_
    std::thread thread;
  };

  void work(Worker& w);
  // One turn of a worker: admit, start, step, finish. `admitted`: the jobs it took from the queue (for
  // the worker's clean-up should it throw). False once stopped and drained.
  bool iterate(Worker& w, std::vector<std::shared_ptr<Job>>& active, std::vector<std::shared_ptr<Job>>& admitted);
  // Takes cancelled jobs out of the queue, ending those their cancel() has not, and counts them; under
  // mutex_. A submit and a worker's turn start with it (status() counts them as it would).
  void drop_cancelled_locked();
  // Admits queued jobs into `active` as the batching rules allow; under mutex_.
  std::vector<std::shared_ptr<Job>> admit_locked(Worker& w, const std::vector<std::shared_ptr<Job>>& active);
  // The catalogue's model with its LoRAs loaded on the worker's placement; its errors say which `role`
  // ("model", "refiner") was loading, and where when there are several workers.
  std::unique_ptr<StableDiffusion> load(const Worker& w, const ModelChoice& choice, const char* role) const;
  // The bytes model `name`'s weights take on the worker's placement, from its files.
  size_t weight_bytes(const Worker& w, const std::string& name) const;
  // The worker's held model `name`, or nullptr.
  static StableDiffusion* find_held(const Worker& w, const std::string& name);
  // The model held by the worker as `choice.key`, marked used: loaded when it is not held, after dropping
  // the least recently used others past keep_models or model_memory (never `beside`, the key of the other
  // model its batch needs).
  const StableDiffusion& hold(Worker& w, const ModelChoice& choice, const char* role,
                              const std::string& beside);
  // The worker's model for its jobs, held or loaded; `refiner`: the refiner they need beside it (kept).
  const StableDiffusion& model(Worker& w, const ModelChoice& choice, const std::string& refiner = "");
  // The worker's refiner `name` beside its model (the model itself when it is that): held or loaded.
  const StableDiffusion& refiner_model(Worker& w, const std::string& name);
  // The model a job's run steps on: its refiner once the refiner's share has begun.
  const StableDiffusion& stepping_model(const Worker& w, const Job& job) const;
  // The model's share done: the refiner's run starts from its latents. False (the job failed) on error.
  bool hand_over(Worker& w, const std::shared_ptr<Job>& job);
  void start(Worker& w, const std::shared_ptr<Job>& job);  // encodes its prompt, makes its starting latents
  void step_all(Worker& w, std::vector<std::shared_ptr<Job>>& active);
  void finish(Worker& w, const std::shared_ptr<Job>& job);
  // Ends `job` (its state, and its error unless done) and counts it.
  void end(const std::shared_ptr<Job>& job, JobState state, std::exception_ptr error = nullptr);
  // Whether a select_model waits for the worker's running jobs to finish (its admission pauses
  // meanwhile); under mutex_.
  bool select_pending_locked(const Worker& w) const { return select_generation_ != w.loaded_generation && !stopping_; }
  // Whether a worker other than `w` that would take a job of `model` and `refiner` runs fewer UNet rows
  // than `rows` (it should take the next job rather than w's batch grow); under mutex_.
  bool lighter_worker_locked(const Worker& w, int64_t rows, const std::string& model,
                             const std::string& refiner) const;
  // Whether some worker has a model change to carry out (admission pauses everywhere until none has).
  bool select_pending_anywhere_locked() const;

  const EngineOptions options_;
  LoraFitCache lora_fits_;  // submit()'s check of each requested LoRA against the job's model
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable model_changed_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::string current_model_;        // jobs naming none run on it
  std::exception_ptr select_error_;  // a select_model's load error (the first worker's to fail)
  uint64_t select_generation_ = 0, select_error_generation_ = 0;  // the select select_error_ belongs to
  uint64_t next_id_ = 1, finished_ = 0, unet_calls_ = 0, unet_rows_ = 0, model_loads_ = 0;
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::once_flag joined_;
};

}  // namespace hd::serve
