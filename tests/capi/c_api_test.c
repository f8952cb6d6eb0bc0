/* The C API from C, linked against the installed library (tests/capi/installed_library_test.sh builds it
 * with pkg-config). argv[1]: the tiny SD1.x fixture model; argv[2]: the CLI's PNG for REFERENCE's
 * settings; argv[3], argv[4]: the tiny SDXL base and refiner; argv[5]: the CLI's PNG of REFINED's settings.
 * Checks: the picture is the CLI's, byte for byte; a second generation repeats it; two threads
 * generating at once (their steps batched together) each get their own picture; progress is reported and
 * can cancel; bad input gives the right status and a message; SDXL's refiner (version 2 of the struct)
 * gives the CLI's refined picture, and a version-1 struct_size keeps the library from reading it; kept
 * models (version 3 of the engine options) serve generations that alternate between models, and an
 * earlier struct_size keeps the library from reading the field. Exits non-zero after all checks when one
 * failed. */
#include <stddef.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hipdiffusion/hipdiffusion.h>

static int failures = 0;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                          \
      fprintf(stderr, "\n");                                 \
      ++failures;                                            \
    }                                                        \
  } while (0)

static hd_engine* engine = NULL;

/* The pictures' width and height (installed_library_test.sh gives the CLI the same): what the checks
 * compare does not depend on it, and the test's time does. */
enum { SIZE = 32, PICTURE_BYTES = SIZE * SIZE * 3 };

/* REFERENCE: what the CLI ran (installed_library_test.sh passes the same settings to it). */
static void reference_params(hd_generation_params* p, uint64_t seed) {
  hd_generation_params_init(p);
  p->prompt = "a red square";
  p->negative_prompt = "blurry";
  p->seed = seed;
  p->steps = 3;
  p->width = p->height = SIZE;
  p->sampler = "euler_a";
}

static unsigned char* read_png_rgb(const char* path, int* width, int* height) {
  png_image image;
  memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path)) return NULL;
  image.format = PNG_FORMAT_RGB;
  unsigned char* pixels = malloc(PNG_IMAGE_SIZE(image));
  if (pixels == NULL || !png_image_finish_read(&image, NULL, pixels, 0, NULL)) {
    free(pixels);
    return NULL;
  }
  *width = (int)image.width;
  *height = (int)image.height;
  return pixels;
}

/* Generates with `p`; returns the first picture's bytes (malloc'd) or NULL, checking its size. */
static unsigned char* picture(const hd_generation_params* p, hd_status expected) {
  hd_result* result = NULL;
  const hd_status status = hd_generate(engine, p, &result);
  CHECK(status == expected, "hd_generate gave %s (%s), expected %s", hd_status_name(status), hd_last_error(),
        hd_status_name(expected));
  if (status != HD_OK) return NULL;
  CHECK(hd_result_image_count(result) == 1, "%d pictures", hd_result_image_count(result));
  CHECK(hd_result_seed(result) == p->seed, "seed %llu", (unsigned long long)hd_result_seed(result));
  int32_t width = 0, height = 0;
  const uint8_t* rgb = NULL;
  CHECK(hd_result_image(result, 0, &width, &height, &rgb) == HD_OK, "%s", hd_last_error());
  CHECK(width == p->width && height == p->height, "a %dx%d picture", width, height);
  CHECK(hd_result_image(result, 1, &width, &height, &rgb) == HD_ERROR_INVALID_ARGUMENT, "picture 1 of 1");
  hd_result_image(result, 0, &width, &height, &rgb);
  unsigned char* copy = malloc((size_t)width * height * 3);
  memcpy(copy, rgb, (size_t)width * height * 3);
  hd_result_free(result);
  return copy;
}

/* A generation the library refuses as the caller's bad input, with a message that says `text`. */
static void expect_refused(const hd_generation_params* p, const char* text) {
  CHECK(picture(p, HD_ERROR_INVALID_ARGUMENT) == NULL, "a refused generation gave a picture");
  CHECK(strstr(hd_last_error(), text) != NULL, "expected \"%s\" in the message: %s", text, hd_last_error());
}

static int largest_difference(const unsigned char* a, const unsigned char* b, size_t n) {
  int largest = 0;
  for (size_t i = 0; i < n; ++i) {
    const int d = abs((int)a[i] - (int)b[i]);
    if (d > largest) largest = d;
  }
  return largest;
}

struct progress_log {
  int calls, last_done, last_total, cancel_after;
};

static int on_progress(int32_t done, int32_t total, void* user_data) {
  struct progress_log* log = user_data;
  CHECK(done >= log->last_done && done <= total, "progress went from %d to %d of %d", log->last_done, done, total);
  log->calls++;
  log->last_done = done;
  log->last_total = total;
  return log->cancel_after >= 0 && done >= log->cancel_after;
}

struct thread_job {
  uint64_t seed;
  unsigned char* rgb;
};

static void* generate_in_thread(void* arg) {
  struct thread_job* job = arg;
  hd_generation_params p;
  reference_params(&p, job->seed);
  p.steps = 8;
  job->rgb = picture(&p, HD_OK);
  return NULL;
}

/* A LoRA of the engine's lora_dir by name (version 3 of the struct): the CLI's --lora picture of the same
 * settings; a struct of version 2 never reads the LoRAs, and unknown names are refused. */
static void check_lora(const char* model, const char* lora_dir, const char* cli_png, const char* plain_png) {
  hd_engine_options options;
  hd_engine_options_init(&options);
  options.model_paths = &model;
  options.model_count = 1;
  options.lora_dir = lora_dir;
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "%s", hd_last_error());
  if (engine == NULL) return;
  int width = 0, height = 0, plain_width = 0, plain_height = 0;
  unsigned char* cli = read_png_rgb(cli_png, &width, &height);
  unsigned char* plain = read_png_rgb(plain_png, &plain_width, &plain_height);
  CHECK(cli != NULL && width == SIZE && height == SIZE, "cannot read %s as a %dx%d PNG", cli_png, SIZE, SIZE);
  const char* names[1] = {"tiny_sd1_lora_kohya"};
  const float scales[1] = {0.7f};
  hd_generation_params p;
  reference_params(&p, 7);
  p.lora_names = names;
  p.lora_scales = scales;
  p.lora_count = 1;
  unsigned char* with_lora = picture(&p, HD_OK);
  if (cli != NULL && with_lora != NULL)
    CHECK(memcmp(with_lora, cli, PICTURE_BYTES) == 0,
          "the LoRA picture differs from the CLI's by up to %d levels",
          largest_difference(with_lora, cli, PICTURE_BYTES));
  p.struct_size = offsetof(hd_generation_params, lora_names); /* version 2: no LoRAs */
  unsigned char* without = picture(&p, HD_OK);
  if (plain != NULL && without != NULL)
    CHECK(memcmp(without, plain, PICTURE_BYTES) == 0, "a version-2 struct read LoRAs it does not have");
  reference_params(&p, 7);
  names[0] = "no LoRA of this name";
  p.lora_names = names;
  p.lora_count = 1;
  expect_refused(&p, "no LoRA named");
  reference_params(&p, 7);
  p.lora_count = 1;
  expect_refused(&p, "lora_names is NULL");
  free(cli);
  free(plain);
  free(with_lora);
  free(without);
  hd_engine_free(engine);
  engine = NULL;
}

/* REFINED: the CLI's --refiner picture (installed_library_test.sh passes the same settings to it). */
static void refined_params(hd_generation_params* p) {
  reference_params(p, 5);
  p->steps = 4;
  p->refiner = "tiny_sdxl_refiner";
  p->refiner_switch_at = 0.5;
}

static void check_refiner(const char* base, const char* refiner, const char* cli_png) {
  const char* models[2] = {base, refiner};
  hd_engine_options options;
  hd_engine_options_init(&options);
  options.model_paths = models;
  options.model_count = 2;
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "%s", hd_last_error());
  if (engine == NULL) return;
  int width = 0, height = 0;
  unsigned char* cli = read_png_rgb(cli_png, &width, &height);
  CHECK(cli != NULL && width == SIZE && height == SIZE, "cannot read %s as a %dx%d PNG", cli_png, SIZE, SIZE);
  hd_generation_params p;
  refined_params(&p);
  unsigned char* refined = picture(&p, HD_OK);
  if (cli != NULL && refined != NULL)
    CHECK(memcmp(refined, cli, PICTURE_BYTES) == 0,
          "the refined picture differs from the CLI's by up to %d levels",
          largest_difference(refined, cli, PICTURE_BYTES));
  /* A program built against version 1 calls the exported function of that name: it writes version 1's
   * fields only, and the library never reads the refiner that such a struct does not have. */
  memset(&p, 0xab, sizeof p);
  (hd_generation_params_init)(&p);  /* the function, not the header's macro */
  CHECK(p.struct_size == offsetof(hd_generation_params, refiner) && p.steps == 20,
        "version 1's init: struct_size %u, steps %d", (unsigned)p.struct_size, p.steps);
  const unsigned char* tail = (const unsigned char*)&p + offsetof(hd_generation_params, refiner);
  CHECK(tail[0] == 0xab && tail[sizeof p - offsetof(hd_generation_params, refiner) - 1] == 0xab,
        "version 1's init wrote past version 1's fields");
  refined_params(&p);
  p.refiner = "no model of this name";
  p.struct_size = offsetof(hd_generation_params, refiner);
  unsigned char* base_only = picture(&p, HD_OK);
  if (refined != NULL && base_only != NULL)
    CHECK(largest_difference(refined, base_only, PICTURE_BYTES) > 0, "the refiner changed nothing");
  refined_params(&p);
  p.refiner_switch_at = 1.0;
  expect_refused(&p, "must be in (0, 1)");
  refined_params(&p);
  p.refiner = "nothing";
  expect_refused(&p, "no model named");
  free(cli);
  free(refined);
  free(base_only);
  hd_engine_free(engine);
  engine = NULL;
}

/* keep_models (version 3): two models kept serve alternating generations, each the same picture each time;
 * out of range refused; the old init writes versions 1 and 2's fields only, and such a struct's garbage
 * beyond them is never read. Then model_memory_bytes (version 4). */
static void check_kept_models(const char* sd1, const char* sdxl_base) {
  const char* models[2] = {sd1, sdxl_base};
  hd_engine_options options;
  hd_engine_options_init(&options);
  CHECK(options.keep_models == 1 && options.struct_size == sizeof options, "the init: keep_models %zu",
        options.keep_models);
  options.model_paths = models;
  options.model_count = 2;
  options.keep_models = 65;
  CHECK(hd_engine_create(&options, &engine) == HD_ERROR_INVALID_ARGUMENT && strstr(hd_last_error(), "keep_models"),
        "65 kept models: %s", hd_last_error());
  options.keep_models = 2;
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "%s", hd_last_error());
  if (engine == NULL) return;
  unsigned char* first[2] = {NULL, NULL};
  const char* names[2] = {"tiny_sd1", "tiny_sdxl_pipeline"};
  for (int round = 0; round < 2; ++round) {
    for (int m = 0; m < 2; ++m) {
      hd_generation_params p;
      reference_params(&p, 5);
      p.model = names[m];
      unsigned char* got = picture(&p, HD_OK);
      if (round == 0) {
        first[m] = got;
      } else {
        if (got != NULL && first[m] != NULL)
          CHECK(memcmp(got, first[m], PICTURE_BYTES) == 0, "%s's picture changed between rounds", names[m]);
        free(got);
      }
    }
  }
  hd_engine_free(engine);
  engine = NULL;
  /* model_memory_bytes (version 4): zero from the init; a bound below both models loads each alone, and
   * the pictures stay the same. A version-3 struct (its size ending before the field) is still taken. */
  hd_engine_options_init(&options);
  CHECK(options.model_memory_bytes == 0, "version 4's init: model_memory_bytes %llu",
        (unsigned long long)options.model_memory_bytes);
  options.model_paths = models;
  options.model_count = 2;
  options.keep_models = 2;
  options.model_memory_bytes = 1;
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "%s", hd_last_error());
  for (int m = 0; engine != NULL && m < 2; ++m) {
    hd_generation_params p;
    reference_params(&p, 5);
    p.model = names[m];
    unsigned char* got = picture(&p, HD_OK);
    if (got != NULL && first[m] != NULL)
      CHECK(memcmp(got, first[m], PICTURE_BYTES) == 0, "%s's picture changed under a memory bound", names[m]);
    free(got);
  }
  hd_engine_free(engine);
  engine = NULL;
  options.struct_size = (uint32_t)offsetof(hd_engine_options, model_memory_bytes);
  memset(&options.model_memory_bytes, 0xab, sizeof options.model_memory_bytes);
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "a version-3 struct was refused: %s", hd_last_error());
  hd_engine_free(engine);
  engine = NULL;
  free(first[0]);
  free(first[1]);
  memset(&options, 0xab, sizeof options);
  (hd_engine_options_init)(&options); /* the function, not the header's macro */
  CHECK(options.struct_size == offsetof(hd_engine_options, keep_models) && options.max_queue == 64,
        "versions 1 and 2's init: struct_size %u", (unsigned)options.struct_size);
  const unsigned char* tail = (const unsigned char*)&options + offsetof(hd_engine_options, keep_models);
  CHECK(tail[0] == 0xab, "the old init wrote past its fields");
  options.model_paths = models;
  options.model_count = 1;
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "an old struct's garbage was read: %s", hd_last_error());
  hd_engine_free(engine);
  engine = NULL;
}

int main(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr,
            "usage: %s TINY_SD1_MODEL CLI_PNG TINY_SDXL_BASE TINY_SDXL_REFINER CLI_REFINED_PNG LORA_DIR "
            "CLI_LORA_PNG\n",
            argv[0]);
    return 2;
  }
  CHECK(strlen(hd_version()) > 0, "no version");
  CHECK(hd_api_version() == HD_API_VERSION, "API version %d, the header's %d", hd_api_version(), HD_API_VERSION);
  hd_generation_params_init(NULL); /* nothing to fill, nothing done */
  hd_engine_options options;
  hd_engine_options_init(&options);
  const char* model = argv[1];
  options.model_paths = &model;
  options.model_count = 1;
  CHECK(hd_engine_create(&options, &engine) == HD_OK, "%s", hd_last_error());
  if (engine == NULL) return 1;
  CHECK(hd_engine_model_count(engine) == 1 && strcmp(hd_engine_model_name(engine, 0), "tiny_sd1") == 0,
        "models: %zu, the first %s", hd_engine_model_count(engine), hd_engine_model_name(engine, 0));

  /* The CLI's picture for the same settings, byte for byte; and again from the loaded model. */
  int cli_width = 0, cli_height = 0;
  unsigned char* cli = read_png_rgb(argv[2], &cli_width, &cli_height);
  CHECK(cli != NULL && cli_width == SIZE && cli_height == SIZE, "cannot read %s as a %dx%d PNG", argv[2],
        SIZE, SIZE);
  hd_generation_params p;
  reference_params(&p, 7);
  struct progress_log log = {0, 0, 0, -1};
  p.progress = on_progress;
  p.progress_user_data = &log;
  unsigned char* first = picture(&p, HD_OK);
  CHECK(log.calls >= 1 && log.last_done == 3 && log.last_total == 3, "progress: %d calls, last %d of %d", log.calls,
        log.last_done, log.last_total);
  p.progress = NULL;
  unsigned char* again = picture(&p, HD_OK);
  const size_t bytes = PICTURE_BYTES;
  if (cli != NULL && first != NULL && again != NULL) {
    CHECK(memcmp(first, cli, bytes) == 0, "the C API's picture differs from the CLI's by up to %d levels",
          largest_difference(first, cli, bytes));
    CHECK(memcmp(first, again, bytes) == 0, "a second generation differs by up to %d levels",
          largest_difference(first, again, bytes));
  }

  /* Two threads at once: each thread's picture is the one its seed gives alone (their steps shared
   * UNet batches; the matrix products' summation order may move a level). */
  struct thread_job jobs[2] = {{11, NULL}, {12, NULL}};
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, generate_in_thread, &jobs[i]);
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < 2; ++i) {
    struct thread_job alone = {jobs[i].seed, NULL};
    generate_in_thread(&alone);
    if (jobs[i].rgb != NULL && alone.rgb != NULL)
      CHECK(largest_difference(jobs[i].rgb, alone.rgb, bytes) <= 1, "seed %llu: together and alone differ by %d levels",
            (unsigned long long)jobs[i].seed, largest_difference(jobs[i].rgb, alone.rgb, bytes));
    free(alone.rgb);
  }
  if (jobs[0].rgb != NULL && jobs[1].rgb != NULL)
    CHECK(largest_difference(jobs[0].rgb, jobs[1].rgb, bytes) > 8, "two seeds gave the same picture");
  free(jobs[0].rgb);
  free(jobs[1].rgb);

  /* A progress callback that asks to stop. */
  reference_params(&p, 7);
  p.steps = 200;
  struct progress_log stop = {0, 0, 0, 1};
  p.progress = on_progress;
  p.progress_user_data = &stop;
  CHECK(picture(&p, HD_ERROR_CANCELLED) == NULL, "a cancelled generation gave a picture");
  CHECK(stop.last_done < 200, "cancelling did not stop it (step %d)", stop.last_done);

  /* Bad input: a status and a message saying what is wrong. */
  reference_params(&p, 7);
  p.steps = 0;
  expect_refused(&p, "steps must be between 1 and 1000");
  reference_params(&p, 7);
  p.model = "../../etc/passwd";
  expect_refused(&p, "no model named");
  reference_params(&p, 7);
  p.sampler = "heun";
  expect_refused(&p, "heun");
  reference_params(&p, 7);
  p.struct_size = 8;
  expect_refused(&p, "struct_size");
  CHECK(hd_generate(engine, NULL, NULL) == HD_ERROR_INVALID_ARGUMENT, "NULL pointers");
  CHECK(hd_engine_select_model(engine, "nothing") == HD_ERROR_INVALID_ARGUMENT, "an unknown model selected");
  hd_engine* other = NULL;

  /* A device list: a worker per device (two on the CPU here); a lone request is the one-device picture. */
  options.device = "cpu,cpu";
  CHECK(hd_engine_create(&options, &other) == HD_OK, "a device list: %s", hd_last_error());
  if (other != NULL) {
    hd_engine* one = engine;
    engine = other;
    reference_params(&p, 7);
    unsigned char* listed = picture(&p, HD_OK);
    if (listed != NULL && first != NULL)
      CHECK(memcmp(listed, first, bytes) == 0, "two workers' picture differs by up to %d levels",
            largest_difference(listed, first, bytes));
    free(listed);
    engine = one;
    hd_engine_free(other);
    other = NULL;
  }
  options.device = "cpu,cuda:0";
  CHECK(hd_engine_create(&options, &other) != HD_OK && other == NULL, "a list of two kinds of device");
  CHECK(strstr(hd_last_error(), "not a cpu device") != NULL, "message: %s", hd_last_error());
  options.device = "vulkan:0";
  CHECK(hd_engine_create(&options, &other) != HD_OK && other == NULL, "a vulkan device");
  CHECK(strstr(hd_last_error(), "vulkan") != NULL, "message: %s", hd_last_error());

  free(cli);
  free(first);
  free(again);
  hd_engine_free(engine);
  engine = NULL;
  check_refiner(argv[3], argv[4], argv[5]);
  check_lora(argv[1], argv[6], argv[7], argv[2]);
  check_kept_models(argv[1], argv[3]);
  if (failures == 0) printf("C API: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
