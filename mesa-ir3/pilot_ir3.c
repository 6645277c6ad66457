/* pilot's bridge to Mesa's ir3 compiler (Mesa 25.0.7, the version scripts/build_mesa.sh pins).
 *
 * nir_builder is mostly static inline in Mesa's headers; this file exposes the part pilot's NIR
 * renderer needs as plain functions, then finalizes, compiles for the Adreno 630 (gpu 630,
 * chip_id 0x06030001), assembles, and reports the facts of the variant the runtime needs. Built by
 * scripts/build_mesa.sh into target/mesa/libpilot_ir3.so; the compiler opens it at run time.
 * Every entry point is single-threaded. Errors are returned as messages, never abort(). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/glsl_types.h"
#include "compiler/nir/nir.h"
#include "compiler/nir/nir_builder.h"
#include "compiler/nir/nir_builtin_builder.h"
#include "freedreno/common/freedreno_dev_info.h"
#include "ir3/ir3_compiler.h"
#include "ir3/ir3_nir.h"
#include "ir3/ir3_shader.h"

#define PILOT_EXPORT __attribute__((visibility("default")))

/* The facts of one compiled program (the contract with compiler/src/target/qcom/ir3/ffi.rs). */
struct pilot_ir3_facts {
   uint32_t instr_dwords;      /* machine code size in dwords (info.size / 4) */
   uint32_t instrlen;          /* instruction length in 128-byte groups, as the variant reports it */
   int32_t max_reg;            /* highest full register (vec4 units, -1 when none) */
   int32_t max_half_reg;       /* highest half register (vec4 units, -1 when none) */
   uint32_t constlen;          /* const file length in vec4 */
   uint32_t params_offset_vec4; /* where UBO 0 (the kernel parameters) is pushed in the const file */
   uint32_t params_size_vec4;
   uint32_t driver_params_offset_vec4; /* driver params (work-group size, ...), 0xffffffff when none */
   uint32_t driver_params_size_vec4;
   uint32_t immediates_offset_vec4;
   uint32_t immediates_count;  /* dwords of immediates the driver uploads */
   uint32_t branchstack;
   uint32_t pvtmem_size;
   uint32_t shared_size;
   uint32_t num_tex;           /* textures (isam), one sampler each */
   uint32_t num_ibo;           /* images written through the IBO path */
   uint8_t tex_to_image[32];
   uint32_t work_group_id_regid; /* register ids as ir3 encodes them (0xfc: unused) */
   uint32_t local_invocation_id_regid;
   uint32_t threadsize_double;
};

struct pilot_ir3 {
   nir_builder b;
   unsigned params_bytes;
   unsigned images;
   bool has_ibo;
   char err[512];
};

static struct ir3_compiler *compiler;
static const struct fd_dev_id dev_id = {.gpu_id = 630, .chip_id = 0x06030001};

PILOT_EXPORT const char *pilot_ir3_version(void) { return "Mesa " PACKAGE_VERSION; }

PILOT_EXPORT struct pilot_ir3 *
pilot_ir3_begin(const char *name, unsigned lx, unsigned ly, unsigned lz)
{
   if (!compiler) {
      glsl_type_singleton_init_or_ref();
      struct ir3_compiler_options opts = {.disable_cache = true};
      compiler = ir3_compiler_create(NULL, &dev_id, fd_dev_info_raw(&dev_id), &opts);
      if (!compiler)
         return NULL;
      /* No preamble (shps/shpe): the dispatch tinygrad's ops_qcom.py proved on the a630 runs none. */
      compiler->has_preamble = false;
   }
   struct pilot_ir3 *p = calloc(1, sizeof(*p));
   p->b = nir_builder_init_simple_shader(MESA_SHADER_COMPUTE, ir3_get_compiler_options(compiler), "%s", name);
   p->b.shader->info.workgroup_size[0] = lx;
   p->b.shader->info.workgroup_size[1] = ly;
   p->b.shader->info.workgroup_size[2] = lz;
   p->b.shader->info.num_ubos = 1;
   return p;
}

PILOT_EXPORT void pilot_ir3_free(struct pilot_ir3 *p)
{
   if (p) {
      ralloc_free(p->b.shader);
      free(p);
   }
}

PILOT_EXPORT nir_def *pilot_ir3_imm(struct pilot_ir3 *p, unsigned bits, uint64_t value)
{
   return bits == 1 ? nir_imm_bool(&p->b, value != 0) : nir_imm_intN_t(&p->b, value, bits);
}

/* An ALU instruction by its NIR opcode name (`fadd`, `i2f32`, ...); NULL when the name or arity is wrong. */
PILOT_EXPORT nir_def *
pilot_ir3_alu(struct pilot_ir3 *p, const char *op, nir_def *a, nir_def *b, nir_def *c)
{
   nir_def *srcs[3] = {a, b, c};
   unsigned n = c ? 3 : b ? 2 : 1;
   for (unsigned i = 0; i < nir_num_opcodes; i++) {
      if (strcmp(nir_op_infos[i].name, op) == 0) {
         if (nir_op_infos[i].num_inputs != n)
            return NULL;
         return nir_build_alu_src_arr(&p->b, i, srcs);
      }
   }
   return NULL;
}

/* Functions Mesa builds from several instructions: atan, atan2. */
PILOT_EXPORT nir_def *pilot_ir3_builtin(struct pilot_ir3 *p, const char *fn, nir_def *a, nir_def *b)
{
   if (strcmp(fn, "atan") == 0)
      return nir_atan(&p->b, a);
   if (strcmp(fn, "atan2") == 0 && b)
      return nir_atan2(&p->b, a, b);
   return NULL;
}

/* `bits` bits of the kernel parameters (UBO 0) at byte `offset`. */
PILOT_EXPORT nir_def *pilot_ir3_param(struct pilot_ir3 *p, unsigned offset, unsigned bits)
{
   if (offset + bits / 8 > p->params_bytes)
      p->params_bytes = offset + bits / 8;
   nir_def *v = nir_load_ubo(&p->b, 1, bits, nir_imm_int(&p->b, 0), nir_imm_int(&p->b, offset),
                             .align_mul = bits / 8, .align_offset = 0, .range_base = 0, .range = ~0);
   return v;
}

PILOT_EXPORT nir_def *pilot_ir3_global_id(struct pilot_ir3 *p, unsigned dim)
{
   nir_builder *b = &p->b;
   nir_def *wg = nir_channel(b, nir_load_workgroup_id(b), dim);
   nir_def *lid = nir_channel(b, nir_load_local_invocation_id(b), dim);
   return nir_iadd(b, nir_imul_imm(b, wg, b->shader->info.workgroup_size[dim]), lid);
}

PILOT_EXPORT nir_def *pilot_ir3_load_global(struct pilot_ir3 *p, nir_def *addr, unsigned bits)
{
   return nir_build_load_global(&p->b, 1, bits, addr, .align_mul = bits / 8, .access = ACCESS_CAN_REORDER);
}

PILOT_EXPORT void pilot_ir3_store_global(struct pilot_ir3 *p, nir_def *addr, nir_def *val)
{
   nir_build_store_global(&p->b, val, addr, .align_mul = val->bit_size / 8, .write_mask = 1);
}

/* `components` (1 to 4) consecutive 32-bit words from word `words` past the 64-bit address `base`:
 * Mesa's `ldg` (a constant offset) or `ldg.a` (a register offset, which the a6xx scales by 4), no
 * 64-bit address arithmetic. Word alignment is enough for a vector (ir3_mem_access_size_align). */
PILOT_EXPORT nir_def *pilot_ir3_load_global_at(struct pilot_ir3 *p, nir_def *base, nir_def *words,
                                               unsigned components)
{
   nir_builder *b = &p->b;
   return nir_load_global_ir3(b, components, 32, nir_unpack_64_2x32(b, base), words,
                              .access = ACCESS_CAN_REORDER, .align_mul = 4, .range_base = 0, .range = ~0);
}

/* The store of a 32-bit `val` at `words` 32-bit words past `base` (`stg` / `stg.a`). */
PILOT_EXPORT void pilot_ir3_store_global_at(struct pilot_ir3 *p, nir_def *base, nir_def *words, nir_def *val)
{
   nir_builder *b = &p->b;
   nir_store_global_ir3(b, val, nir_unpack_64_2x32(b, base), words, .align_mul = 4);
}

static nir_def *coord(struct pilot_ir3 *p, nir_def *x, nir_def *y)
{
   nir_builder *b = &p->b;
   return nir_vec4(b, x, y, nir_undef(b, 1, 32), nir_undef(b, 1, 32));
}

/* A read-only image's pixel as float4: image `index` among the read images (ir3 makes it an isam). */
PILOT_EXPORT nir_def *pilot_ir3_image_load(struct pilot_ir3 *p, unsigned index, nir_def *x, nir_def *y)
{
   nir_builder *b = &p->b;
   if (index + 1 > p->images)
      p->images = index + 1;
   return nir_image_load(b, 4, 32, nir_imm_int(b, index), coord(p, x, y), nir_undef(b, 1, 32), nir_imm_int(b, 0),
                         .image_dim = GLSL_SAMPLER_DIM_2D, .access = ACCESS_CAN_REORDER | ACCESS_NON_WRITEABLE,
                         .dest_type = nir_type_float32);
}

/* A pixel written to the output image (image `index` of the written images: the IBO path). */
PILOT_EXPORT void pilot_ir3_image_store(struct pilot_ir3 *p, unsigned index, nir_def *x, nir_def *y, nir_def *rgba)
{
   nir_builder *b = &p->b;
   if (index + 1 > p->images)
      p->images = index + 1;
   p->has_ibo = true;
   nir_image_store(b, nir_imm_int(b, index), coord(p, x, y), nir_undef(b, 1, 32), rgba, nir_imm_int(b, 0),
                   .image_dim = GLSL_SAMPLER_DIM_2D, .access = ACCESS_NON_READABLE, .src_type = nir_type_float32);
}

PILOT_EXPORT nir_def *pilot_ir3_channel(struct pilot_ir3 *p, nir_def *v, unsigned c) { return nir_channel(&p->b, v, c); }

PILOT_EXPORT nir_def *pilot_ir3_vec4(struct pilot_ir3 *p, nir_def *x, nir_def *y, nir_def *z, nir_def *w)
{
   return nir_vec4(&p->b, x, y, z, w);
}

/* A function-local variable (lowered to SSA by finalize): loop counters and accumulators. */
PILOT_EXPORT nir_variable *pilot_ir3_var(struct pilot_ir3 *p, unsigned bits)
{
   const struct glsl_type *t = bits == 1 ? glsl_bool_type() : glsl_uintN_t_type(bits);
   return nir_local_variable_create(p->b.impl, t, NULL);
}

PILOT_EXPORT nir_def *pilot_ir3_var_load(struct pilot_ir3 *p, nir_variable *v) { return nir_load_var(&p->b, v); }

PILOT_EXPORT void pilot_ir3_var_store(struct pilot_ir3 *p, nir_variable *v, nir_def *x) { nir_store_var(&p->b, v, x, 1); }

PILOT_EXPORT nir_loop *pilot_ir3_loop_begin(struct pilot_ir3 *p) { return nir_push_loop(&p->b); }

PILOT_EXPORT void pilot_ir3_break_if(struct pilot_ir3 *p, nir_def *cond) { nir_break_if(&p->b, cond); }

PILOT_EXPORT void pilot_ir3_loop_end(struct pilot_ir3 *p, nir_loop *l) { nir_pop_loop(&p->b, l); }

PILOT_EXPORT void pilot_ir3_barrier(struct pilot_ir3 *p)
{
   nir_barrier(&p->b, .execution_scope = SCOPE_WORKGROUP, .memory_scope = SCOPE_WORKGROUP,
               .memory_semantics = NIR_MEMORY_ACQ_REL, .memory_modes = nir_var_mem_shared);
}

PILOT_EXPORT const char *pilot_ir3_error(struct pilot_ir3 *p) { return p->err; }

static bool fail(struct pilot_ir3 *p, const char *fmt, ...)
{
   va_list ap;
   va_start(ap, fmt);
   vsnprintf(p->err, sizeof(p->err), fmt, ap);
   va_end(ap);
   return false;
}

/* Finalizes and compiles the shader; on success `*code` (malloc'd, `facts->instr_dwords` dwords) holds
 * the machine code and `*immediates` (malloc'd, `facts->immediates_count` dwords) the immediates. */
PILOT_EXPORT bool pilot_ir3_compile(struct pilot_ir3 *p, struct pilot_ir3_facts *facts, uint32_t **code,
                                   uint32_t **immediates)
{
   nir_shader *s = p->b.shader;
   char name[128];
   snprintf(name, sizeof(name), "%s", s->info.name ? s->info.name : "?");
   s->info.num_images = p->images;
   /* Every load_ubo's range is the whole parameter block, which the driver uploads in full. */
   nir_foreach_function_impl(impl, s) {
      nir_foreach_block(block, impl) {
         nir_foreach_instr(instr, block) {
            if (instr->type == nir_instr_type_intrinsic && nir_instr_as_intrinsic(instr)->intrinsic == nir_intrinsic_load_ubo)
               nir_intrinsic_set_range(nir_instr_as_intrinsic(instr), p->params_bytes);
         }
      }
   }
   NIR_PASS(_, s, nir_lower_vars_to_ssa);
   struct ir3_shader_nir_options nir_opts = {0};
   ir3_finalize_nir(compiler, &nir_opts, s);
   struct ir3_shader_options opts = {.api_wavesize = IR3_SINGLE_OR_DOUBLE, .real_wavesize = IR3_SINGLE_OR_DOUBLE};
   struct ir3_shader *shader = ir3_shader_from_nir(compiler, s, &opts, NULL);
   p->b.shader = NULL; /* owned by `shader` now */
   struct ir3_shader_key key = {0};
   struct ir3_shader_variant *v = ir3_shader_create_variant(shader, &key, false);
   bool ok = false;
   if (!v || !v->bin) {
      fail(p, "Mesa's ir3 failed to compile `%s`", name);
      goto out;
   }
   if (v->constant_data_size) {
      fail(p, "`%s`: ir3 placed constant data after the code; pilot does not upload it yet", name);
      goto out;
   }
   const struct ir3_const_state *cs = ir3_const_state(v);
   memset(facts, 0, sizeof(*facts));
   facts->instr_dwords = v->info.size / 4;
   facts->instrlen = v->instrlen;
   facts->max_reg = v->info.max_reg;
   facts->max_half_reg = v->info.max_half_reg;
   facts->constlen = v->constlen;
   facts->params_offset_vec4 = 0xffffffff;
   for (unsigned i = 0; i < cs->ubo_state.num_enabled; i++) {
      const struct ir3_ubo_range *r = &cs->ubo_state.range[i];
      if (r->ubo.block == 0 && !r->ubo.bindless) {
         if (r->start != 0) {
            fail(p, "`%s`: ir3 pushed the kernel parameters from byte %u, not 0", name, r->start);
            goto out;
         }
         facts->params_offset_vec4 = r->offset / 16;
         facts->params_size_vec4 = (r->end - r->start) / 16;
      }
   }
   if (facts->params_offset_vec4 == 0xffffffff && p->params_bytes) {
      /* Unpushed, the parameters would be read with ldc from a UBO descriptor pilot does not bind. */
      fail(p, "`%s`: ir3 did not push the kernel parameters into the const file", name);
      goto out;
   }
   const struct ir3_const_allocation *dp = &cs->allocs.consts[IR3_CONST_ALLOC_DRIVER_PARAMS];
   facts->driver_params_offset_vec4 = dp->size_vec4 ? dp->offset_vec4 : 0xffffffff;
   facts->driver_params_size_vec4 = dp->size_vec4;
   facts->immediates_offset_vec4 = cs->allocs.max_const_offset_vec4;
   facts->immediates_count = cs->immediates_count;
   facts->branchstack = v->branchstack;
   facts->pvtmem_size = v->pvtmem_size;
   facts->shared_size = v->shared_size;
   facts->num_tex = v->image_mapping.num_tex;
   facts->num_ibo = p->has_ibo ? 1 : 0;
   memcpy(facts->tex_to_image, v->image_mapping.tex_to_image, sizeof(facts->tex_to_image));
   facts->work_group_id_regid = v->cs.work_group_id;
   facts->local_invocation_id_regid = v->cs.local_invocation_id;
   facts->threadsize_double = v->info.double_threadsize;
   *code = malloc(v->info.size);
   memcpy(*code, v->bin, v->info.size);
   *immediates = malloc(4 * (cs->immediates_count + 1));
   memcpy(*immediates, cs->immediates, 4 * cs->immediates_count);
   ok = true;
out:
   ir3_shader_destroy(shader);
   return ok;
}

PILOT_EXPORT void pilot_ir3_free_buffer(void *x) { free(x); }
