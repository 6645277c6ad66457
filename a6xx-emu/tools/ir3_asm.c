/*
 * ir3-asm: assembles ir3 assembly text (Mesa's syntax, parsed by Mesa's own ir3_parse_asm in
 * src/freedreno/ir3/ir3_assembler.c) into a6xx machine code for gpu-id 630.
 *
 * Usage: ir3-asm IN.asm OUT.bin
 * Writes the instruction words (little-endian) to OUT.bin and prints one line to stdout:
 *   size=<bytes> instrs=<count> max_reg=<n> max_half_reg=<n> max_const=<n>
 * The emulator's tests use it as an encoder independent of pilot.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ir3.h"
#include "ir3_assembler.h"
#include "ir3_shader.h"

int
main(int argc, char **argv)
{
   if (argc != 3) {
      fprintf(stderr, "usage: ir3-asm IN.asm OUT.bin\n");
      return 2;
   }
   FILE *in = fopen(argv[1], "r");
   if (!in) {
      fprintf(stderr, "ir3-asm: cannot open %s\n", argv[1]);
      return 2;
   }
   struct fd_dev_id dev_id = { .gpu_id = 630 };
   struct ir3_compiler *c = ir3_compiler_create(NULL, &dev_id, fd_dev_info_raw(&dev_id),
                                                &(struct ir3_compiler_options){});
   struct ir3_kernel_info info = {};
   struct ir3_shader *shader = ir3_parse_asm(c, &info, in);
   fclose(in);
   if (!shader) {
      fprintf(stderr, "ir3-asm: %s does not assemble\n", argv[1]);
      return 2;
   }
   struct ir3_shader_variant *v = shader->variants;
   FILE *out = fopen(argv[2], "wb");
   if (!out || fwrite(v->bin, 1, v->info.size, out) != (size_t)v->info.size || fclose(out)) {
      fprintf(stderr, "ir3-asm: cannot write %s\n", argv[2]);
      return 2;
   }
   printf("size=%d instrs=%d max_reg=%d max_half_reg=%d max_const=%d\n", v->info.size,
          v->info.instrs_count, v->info.max_reg, v->info.max_half_reg, v->info.max_const);
   ir3_shader_destroy(shader);
   ir3_compiler_destroy(c);
   return 0;
}
