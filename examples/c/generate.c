/* The smallest program over hipDiffusion's C API: one picture from a prompt, written as a PPM file.
 *
 *   cc generate.c $(pkg-config --cflags --libs hipdiffusion) -o generate
 *   ./generate MODEL "a red square on a blue background" out.ppm [cpu|cuda:0|hip:0] [steps] [size]
 *
 * MODEL is a .safetensors checkpoint or a diffusers folder. */
#include <stdio.h>
#include <stdlib.h>

#include <hipdiffusion/hipdiffusion.h>

static int show_progress(int32_t done, int32_t total, void* user_data) {
  (void)user_data;
  fprintf(stderr, "\rstep %d/%d", done, total);
  return 0; /* nonzero would cancel */
}

static int fail(const char* what, hd_status status) {
  fprintf(stderr, "%s: %s: %s\n", what, hd_status_name(status), hd_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL PROMPT OUT.ppm [device] [steps] [size]\n", argv[0]);
    return 2;
  }
  hd_engine_options options;
  hd_engine_options_init(&options);
  const char* model = argv[1];
  options.model_paths = &model;
  options.model_count = 1;
  options.device = argc > 4 ? argv[4] : "cpu";
  hd_engine* engine = NULL;
  hd_status status = hd_engine_create(&options, &engine);
  if (status != HD_OK) return fail("hd_engine_create", status);

  hd_generation_params params;
  hd_generation_params_init(&params);
  params.prompt = argv[2];
  params.seed = 42;
  params.steps = argc > 5 ? atoi(argv[5]) : 20;
  params.width = params.height = argc > 6 ? atoi(argv[6]) : 512;
  params.progress = show_progress;
  hd_result* result = NULL;
  status = hd_generate(engine, &params, &result);
  fprintf(stderr, "\n");
  if (status != HD_OK) {
    hd_engine_free(engine);
    return fail("hd_generate", status);
  }
  int32_t width = 0, height = 0;
  const uint8_t* rgb = NULL;
  hd_result_image(result, 0, &width, &height, &rgb);
  FILE* out = fopen(argv[3], "wb");
  int written = out != NULL && fprintf(out, "P6\n%d %d\n255\n", width, height) > 0 &&
                fwrite(rgb, 3, (size_t)width * (size_t)height, out) == (size_t)width * (size_t)height;
  if (out != NULL) written = (fclose(out) == 0) && written;
  fprintf(stderr, "%s: %dx%d in %.2f s (seed %llu)\n", argv[3], width, height, hd_result_seconds(result),
          (unsigned long long)hd_result_seed(result));
  hd_result_free(result);
  hd_engine_free(engine);
  if (!written) {
    fprintf(stderr, "%s: cannot write\n", argv[3]);
    return 1;
  }
  return 0;
}
