/* hipDiffusion's C API: Stable Diffusion 1.x/2.x/SDXL text-to-image and image-to-image from a program in
 * any language that calls C. One engine keeps its models loaded between generations and runs several
 * generations' steps together (requests of one model and size share each UNet batch).
 *
 * Conventions: every call returns an hd_status; on failure hd_last_error() gives this thread's message.
 * Structs the caller fills start with struct_size (set by the *_init function: a library of a later
 * version reads only the fields a caller's struct has). Nothing C++ crosses this boundary: handles are
 * opaque, strings are UTF-8 and NUL-terminated, images are 8-bit RGB, row-major.
 *
 * Link with -lhipdiffusion (pkg-config hipdiffusion, or CMake's find_package(hipdiffusion)).
 */
#ifndef HIPDIFFUSION_H
#define HIPDIFFUSION_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define HD_API __attribute__((visibility("default")))
#else
#define HD_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* 2: hd_generation_params gained refiner and refiner_switch_at (a version-1 struct_size still works), and
 * hd_generation_params_init became a macro over hd_generation_params_init_sized.
 * 3: hd_engine_options gained keep_models (an earlier struct_size still works), and hd_engine_options_init
 * became a macro over hd_engine_options_init_sized.
 * 4: hd_engine_options gained model_memory_bytes (an earlier struct_size still works).
 * 5: hd_engine_options gained lora_dir and hd_generation_params lora_names, lora_scales and lora_count
 * (earlier struct_sizes still work). */
#define HD_API_VERSION 5

typedef enum hd_status {
  HD_OK = 0,
  HD_ERROR_INVALID_ARGUMENT = 1, /* a bad parameter, model name, file or image: the caller's input */
  HD_ERROR_UNSUPPORTED = 2,      /* valid input this build cannot handle (e.g. a GPU device in a CPU build) */
  HD_ERROR_OUT_OF_MEMORY = 3,    /* host or device memory ran out */
  HD_ERROR_RUNTIME = 4,          /* a system or device call failed */
  HD_ERROR_INTERNAL = 5,         /* a bug in hipDiffusion */
  HD_ERROR_BUSY = 6,             /* the engine's queue is full: try again later */
  HD_ERROR_CANCELLED = 7         /* the progress callback asked to stop */
} hd_status;

/* A short name for a status ("invalid argument", ...). */
HD_API const char* hd_status_name(hd_status status);
/* The message of this thread's last failed call ("" when none failed). Valid until this thread's next call. */
HD_API const char* hd_last_error(void);
/* The library's version, "0.1.0". */
HD_API const char* hd_version(void);
/* The HD_API_VERSION the library was built with (2 and later; a version-1 library lacks this call): a
 * program or binding checks it before setting a later version's fields. */
HD_API int32_t hd_api_version(void);

typedef struct hd_engine hd_engine;

typedef struct hd_engine_options {
  uint32_t struct_size;
  /* Models the engine may load, named by their file or folder name: model_count paths (.safetensors
   * files or diffusers folders) and/or every model in models_dir. None: the built-in model. */
  const char* const* model_paths;
  size_t model_count;
  const char* models_dir;
  const char* device;  /* "cpu" (default), "cuda:0", "hip:0", ...; "cuda:0,cuda:1" or "all": one worker per GPU */
  const char* dtype;   /* NULL: f32 on the CPU, f16 on a GPU; or "f16", "bf16", "f32" */
  uint32_t max_queue;      /* generations waiting to start before HD_ERROR_BUSY (default 64) */
  uint32_t max_batch_rows; /* UNet rows one step may hold across generations (default 16) */
  int32_t batch_across_generations; /* nonzero (default): generations share UNet batches */
  /* Version 3, read only when struct_size covers it. Models the engine keeps loaded on each device, at
   * most 64 (default 1; 0 means the default): generations that alternate between models load each once,
   * and when one more is needed the least recently used goes first. */
  size_t keep_models;
  /* Version 4, read only when struct_size covers it. Bytes the models kept on each device may take
   * together (their weights in the engine's dtype); 0 (default): no bound but keep_models. The least
   * recently used go until a new model fits; a model larger than the bound still loads, alone. */
  uint64_t model_memory_bytes;
  /* Version 5, read only when struct_size covers it. A folder of LoRA files (*.safetensors, kohya's or
   * diffusers' form) that generations may ask for by name, the file's name without ".safetensors"
   * (AUTOMATIC1111's --lora-dir); NULL: none. */
  const char* lora_dir;
} hd_engine_options;

/* Fills the struct with its defaults and sets struct_size from `size`, the caller's sizeof (as
 * hd_generation_params_init_sized does; the function of the old name fills versions 1 and 2's fields). */
HD_API void hd_engine_options_init_sized(hd_engine_options* options, size_t size);
HD_API void hd_engine_options_init(hd_engine_options* options);
#define hd_engine_options_init(options) hd_engine_options_init_sized((options), sizeof(hd_engine_options))
/* Checks the options and the models' paths; loads no model until a generation (or
 * hd_engine_select_model) needs one. */
HD_API hd_status hd_engine_create(const hd_engine_options* options, hd_engine** engine);
/* Finishes the generations already accepted, then frees everything. No other call on this engine may be
 * in progress or start once this is called. NULL is allowed. */
HD_API void hd_engine_free(hd_engine* engine);
/* The engine's models: how many, and the name of model `index` (valid while the engine lives). */
HD_API size_t hd_engine_model_count(const hd_engine* engine);
HD_API const char* hd_engine_model_name(const hd_engine* engine, size_t index);
/* Loads model `name` for generations that name none (unloading the least recently used past keep_models). */
HD_API hd_status hd_engine_select_model(hd_engine* engine, const char* name);

/* Called on the thread that called hd_generate, about every 20 ms while it runs: steps done and in all.
 * A nonzero return cancels the generation (hd_generate then returns HD_ERROR_CANCELLED). */
typedef int (*hd_progress_fn)(int32_t steps_done, int32_t steps_total, void* user_data);

typedef struct hd_generation_params {
  uint32_t struct_size;
  const char* model; /* a model's name; NULL: the engine's current one */
  const char* prompt;
  const char* negative_prompt; /* NULL: none */
  int32_t steps;               /* default 20 */
  float cfg_scale;             /* default 7.5; <= 1 turns classifier-free guidance off */
  const char* sampler;         /* "euler" (default), "euler_a", "ddim", "dpmpp_2m" */
  const char* schedule;        /* "discrete" (default) or "karras" */
  uint64_t seed;               /* the same noise as torch.Generator("cpu").manual_seed(seed) */
  int32_t width, height;       /* required: multiples of 8 (512x512 for SD1.x, 1024x1024 for SDXL) */
  int32_t batch;               /* images drawn together from the seed's one stream (default 1) */
  /* img2img: an 8-bit RGB picture of width x height (NULL: text-to-image), and how much of it is
   * noised away, in (0, 1] (default 0.75). */
  const uint8_t* init_image;
  float strength;
  hd_progress_fn progress;
  void* progress_user_data;
  /* Version 2, read only when struct_size covers them. SDXL's refiner, a model's name (NULL: none): the
   * model denoises the first refiner_switch_at of the schedule by noise level (diffusers' high_noise_frac,
   * AUTOMATIC1111's switch by timestep), the refiner the rest; in (0, 1), default 0.8. */
  const char* refiner;
  double refiner_switch_at;
  /* Version 3 (HD_API_VERSION 5), read only when struct_size covers them. lora_count LoRAs of the engine's
   * lora_dir, by name, merged into the model's weights in order, each at lora_scales[i] (NULL: 1 each), as
   * AUTOMATIC1111's <lora:NAME:SCALE> (one scale for the text encoders and the UNet: the server's
   * <lora:NAME:TE:UNET> has no field here); the model with them is loaded (and kept) as a model of its own.
   */
  const char* const* lora_names;
  const float* lora_scales;
  size_t lora_count;
} hd_generation_params;

/* Fills the struct with its defaults and sets struct_size: `size` is the caller's sizeof, so that a
 * library of a later version writes only the fields the caller's struct has. The macro below passes it;
 * the function of that name (version 1's, for programs built against it, and what a binding that cannot
 * expand C macros reaches by name) fills version 1's fields only: such a binding calls
 * hd_generation_params_init_sized itself with its struct's size, or the refiner is never read. */
HD_API void hd_generation_params_init_sized(hd_generation_params* params, size_t size);
HD_API void hd_generation_params_init(hd_generation_params* params);
#define hd_generation_params_init(params) hd_generation_params_init_sized((params), sizeof(hd_generation_params))

typedef struct hd_result hd_result;

/* Generates, blocking the calling thread until done; *result then holds the pictures. Other threads may
 * generate on the same engine at the same time (their steps are batched together). */
HD_API hd_status hd_generate(hd_engine* engine, const hd_generation_params* params, hd_result** result);
HD_API int32_t hd_result_image_count(const hd_result* result);
/* Picture `index`: its size and its width * height * 3 bytes, valid until hd_result_free. */
HD_API hd_status hd_result_image(const hd_result* result, int32_t index, int32_t* width, int32_t* height,
                                 const uint8_t** rgb);
/* The seed, and the time the generation took, in seconds. */
HD_API uint64_t hd_result_seed(const hd_result* result);
HD_API double hd_result_seconds(const hd_result* result);
HD_API void hd_result_free(hd_result* result);

#ifdef __cplusplus
}
#endif

#endif /* HIPDIFFUSION_H */
