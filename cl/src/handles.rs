//! Owned OpenCL objects and the calls made on them.
//!
//! Every `unsafe` call into OpenCL lives in this module, behind methods whose argument types make the
//! call sound: objects are passed as live owned handles (by reference), host memory as slices, and
//! every transfer is blocking, so no host pointer outlives the call that uses it. Each owned type
//! holds exactly one reference to its object and releases it on drop.
//!
//! cl3's own wrappers return an event from every enqueue; the methods here release it at once unless
//! they hand it back (profiling).

use std::ffi::{c_void, CStr};
use std::ptr;

use cl3::{command_queue, context, event, kernel, memory, program};
use opencl_sys::{
    cl_buffer_region, cl_channel_type, cl_command_queue, cl_command_queue_properties, cl_context, cl_device_id,
    cl_event, cl_image_desc, cl_image_format, cl_int, cl_kernel, cl_mem, cl_program, cl_uint, CL_BLOCKING,
    CL_BUFFER_CREATE_TYPE_REGION, CL_INVALID_VALUE, CL_KERNEL_NUM_ARGS, CL_KERNEL_WORK_GROUP_SIZE,
    CL_MEM_OBJECT_IMAGE2D, CL_MEM_READ_WRITE, CL_PROFILING_COMMAND_END, CL_PROFILING_COMMAND_START,
    CL_PROGRAM_BUILD_LOG, CL_RGBA,
};

pub(crate) type ClResult<T> = Result<T, cl_int>;

macro_rules! owned {
    ($(#[$doc:meta])* $name:ident($raw:ty), $release:path) => {
        $(#[$doc])*
        pub(crate) struct $name($raw);

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: the handle came from a successful create (or retain) call, and this value
                // owns exactly one reference to it, released exactly once, here.
                let _ = unsafe { $release(self.0) };
            }
        }

        // SAFETY: OpenCL objects are thread-safe (OpenCL 1.2 appendix A.2) except for clSetKernelArg
        // on one kernel from two threads, which `Kernel::set_mem_arg` rules out by taking `&mut self`.
        unsafe impl Send for $name {}
    };
}

owned!(
    /// A context on one device.
    Context(cl_context),
    context::release_context
);
owned!(
    /// An in-order command queue.
    Queue(cl_command_queue),
    command_queue::release_command_queue
);
owned!(
    /// A buffer, a sub-buffer or an image.
    Mem(cl_mem),
    memory::release_mem_object
);
owned!(
    /// A program built from source.
    Program(cl_program),
    program::release_program
);
owned!(
    /// A kernel object (one per program and argument list in a step: it carries those arguments).
    Kernel(cl_kernel),
    kernel::release_kernel
);
owned!(
    /// An enqueued command's event.
    Event(cl_event),
    event::release_event
);

/// A device id from clGetDeviceIDs: root devices live as long as the process and are not released.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceId(pub cl_device_id);

// SAFETY: a root device id is an immutable, process-wide handle; OpenCL calls on it are thread-safe.
unsafe impl Send for DeviceId {}

impl Context {
    pub(crate) fn new(device: DeviceId) -> ClResult<Context> {
        context::create_context(&[device.0], ptr::null(), None, ptr::null_mut()).map(Context)
    }
}

impl Queue {
    pub(crate) fn new(context: &Context, device: DeviceId, properties: cl_command_queue_properties) -> ClResult<Queue> {
        // clCreateCommandQueue is deprecated from OpenCL 2.0 but present in every ICD; 1.2 platforms
        // (Adreno included) lack the 2.0 replacement.
        // SAFETY: `context` is live and `device` is a root device id of its platform.
        unsafe { command_queue::create_command_queue(context.0, device.0, properties) }.map(Queue)
    }

    /// Writes `data` at `offset` of `mem`, blocking until the write finished.
    pub(crate) fn write_buffer(&self, mem: &Mem, offset: usize, data: &[u8]) -> ClResult<()> {
        // SAFETY: the write is blocking, so OpenCL reads `data` (`data.len()` readable bytes) only
        // before it returns; it checks `offset + len` against the buffer's size itself.
        let ev = unsafe {
            command_queue::enqueue_write_buffer(
                self.0,
                mem.0,
                CL_BLOCKING,
                offset,
                data.len(),
                data.as_ptr().cast(),
                0,
                ptr::null(),
            )
        }?;
        drop(Event(ev));
        Ok(())
    }

    /// Reads `out.len()` bytes at `offset` of `mem`, blocking.
    pub(crate) fn read_buffer(&self, mem: &Mem, offset: usize, out: &mut [u8]) -> ClResult<()> {
        // SAFETY: blocking read into an exclusive slice of exactly `out.len()` writable bytes.
        let ev = unsafe {
            command_queue::enqueue_read_buffer(
                self.0,
                mem.0,
                CL_BLOCKING,
                offset,
                out.len(),
                out.as_mut_ptr().cast(),
                0,
                ptr::null(),
            )
        }?;
        drop(Event(ev));
        Ok(())
    }

    /// Fills `size` bytes of `mem` with zeros (ordered like any other command).
    pub(crate) fn zero_buffer(&self, mem: &Mem, size: usize) -> ClResult<()> {
        let zero = 0u8;
        // SAFETY: the one-byte pattern is copied at enqueue (clEnqueueFillBuffer lets the caller
        // reuse it on return); `mem` is live.
        let ev = unsafe {
            command_queue::enqueue_fill_buffer(self.0, mem.0, ptr::from_ref(&zero).cast(), 1, 0, size, 0, ptr::null())
        }?;
        drop(Event(ev));
        Ok(())
    }

    /// Writes a whole image from `data`: `image.height` rows `pitch` bytes apart. Blocking.
    pub(crate) fn write_image(&self, image: &Image, pitch: usize, data: &[u8]) -> ClResult<()> {
        image.check_pitched(pitch, data.len())?;
        let origin = [0usize; 3];
        let region = [image.width, image.height, 1];
        // SAFETY: blocking; OpenCL reads `height` rows of `width * pixel` bytes, `pitch` apart, and
        // `check_pitched` verified `pitch >= width * pixel` and `data.len() >= pitch * height`, so every
        // read is inside `data`. The image is 2-D, so the slice pitch is 0. cl3 declares the host
        // pointer `*mut` but clEnqueueWriteImage only reads it.
        let ev = unsafe {
            command_queue::enqueue_write_image(
                self.0,
                image.mem.0,
                CL_BLOCKING,
                origin.as_ptr(),
                region.as_ptr(),
                pitch,
                0,
                data.as_ptr().cast_mut().cast(),
                0,
                ptr::null(),
            )
        }?;
        drop(Event(ev));
        Ok(())
    }

    /// Reads a whole image into `out` in the pitched layout of [`Queue::write_image`]. Blocking.
    pub(crate) fn read_image(&self, image: &Image, pitch: usize, out: &mut [u8]) -> ClResult<()> {
        image.check_pitched(pitch, out.len())?;
        let origin = [0usize; 3];
        let region = [image.width, image.height, 1];
        // SAFETY: as in `write_image`, with every write inside the exclusive slice `out`; the padding
        // between rows is left untouched.
        let ev = unsafe {
            command_queue::enqueue_read_image(
                self.0,
                image.mem.0,
                CL_BLOCKING,
                origin.as_ptr(),
                region.as_ptr(),
                pitch,
                0,
                out.as_mut_ptr().cast(),
                0,
                ptr::null(),
            )
        }?;
        drop(Event(ev));
        Ok(())
    }

    /// Fills an image with (0, 0, 0, 0).
    pub(crate) fn zero_image(&self, image: &Image) -> ClResult<()> {
        let color = [0f32; 4];
        let origin = [0usize; 3];
        let region = [image.width, image.height, 1];
        // SAFETY: float and half-float images take a float4 fill colour, copied at enqueue;
        // origin and region are arrays of three `size_t`.
        let ev = unsafe {
            command_queue::enqueue_fill_image(
                self.0,
                image.mem.0,
                color.as_ptr().cast(),
                origin.as_ptr(),
                region.as_ptr(),
                0,
                ptr::null(),
            )
        }?;
        drop(Event(ev));
        Ok(())
    }

    /// Enqueues a device-side copy of `len` bytes; the regions must not overlap within one buffer.
    pub(crate) fn copy_buffer(
        &self,
        src: &Mem,
        dst: &Mem,
        src_offset: usize,
        dst_offset: usize,
        len: usize,
    ) -> ClResult<Event> {
        // SAFETY: both buffers are live (borrowed) device objects; no host memory is involved and
        // OpenCL checks both ranges (and overlap) itself.
        unsafe { command_queue::enqueue_copy_buffer(self.0, src.0, dst.0, src_offset, dst_offset, len, 0, ptr::null()) }
            .map(Event)
    }

    /// Enqueues `kernel` over `global` work-items (the first `dims` entries); `local: None` lets the
    /// driver choose the work-group size.
    pub(crate) fn dispatch(
        &self,
        kernel: &Kernel,
        dims: u32,
        global: &[usize; 3],
        local: Option<&[usize; 3]>,
    ) -> ClResult<Event> {
        debug_assert!((1..=3).contains(&dims));
        let local = local.map_or(ptr::null(), |l| l.as_ptr());
        // SAFETY: `global` and `local` (when given) point to three `size_t`s, at least `dims`; the
        // global offset and wait list are empty; `kernel` is live with its arguments set at link.
        unsafe {
            command_queue::enqueue_nd_range_kernel(
                self.0,
                kernel.0,
                dims,
                ptr::null(),
                global.as_ptr(),
                local,
                0,
                ptr::null(),
            )
        }
        .map(Event)
    }

    /// Issues all enqueued commands to the device.
    pub(crate) fn flush(&self) -> ClResult<()> {
        command_queue::flush(self.0)
    }

    /// Blocks until all enqueued commands completed.
    pub(crate) fn finish(&self) -> ClResult<()> {
        command_queue::finish(self.0)
    }
}

impl Mem {
    /// A read-write buffer of `size` bytes (contents undefined; see [`Queue::zero_buffer`]).
    pub(crate) fn buffer(context: &Context, size: usize) -> ClResult<Mem> {
        // SAFETY: no host pointer is passed (no USE/COPY_HOST_PTR flags); `context` is live.
        unsafe { memory::create_buffer(context.0, CL_MEM_READ_WRITE, size, ptr::null_mut()) }.map(Mem)
    }

    /// Bytes `origin..origin + size` of this buffer as a buffer of its own; OpenCL requires `origin`
    /// to be a multiple of the device's base address alignment.
    pub(crate) fn sub_buffer(&self, origin: usize, size: usize) -> ClResult<Mem> {
        let region = cl_buffer_region { origin, size };
        // SAFETY: flags 0 inherit the parent's access; `region` is a live `cl_buffer_region`, the type
        // CL_BUFFER_CREATE_TYPE_REGION expects, read during the call only.
        unsafe {
            memory::create_sub_buffer(self.0, 0, CL_BUFFER_CREATE_TYPE_REGION, ptr::from_ref(&region).cast::<c_void>())
        }
        .map(Mem)
    }

    /// Another owned reference to the same object.
    pub(crate) fn retain(&self) -> ClResult<Mem> {
        // SAFETY: `self` is live; the new reference is owned (and released) by the returned value.
        unsafe { memory::retain_mem_object(self.0) }.map(|()| Mem(self.0))
    }
}

/// A 2-D `CL_RGBA` image with the geometry its transfers are checked against.
pub(crate) struct Image {
    pub(crate) mem: Mem,
    width: usize,
    height: usize,
    /// Bytes per pixel (four channels).
    pixel: usize,
}

impl Image {
    /// A read-write `width × height` RGBA image of `channel_type` (`CL_FLOAT` or `CL_HALF_FLOAT`)
    /// whose channels are `channel_bytes` wide.
    pub(crate) fn new(
        context: &Context,
        width: usize,
        height: usize,
        channel_type: cl_channel_type,
        channel_bytes: usize,
    ) -> ClResult<Image> {
        let format = cl_image_format { image_channel_order: CL_RGBA, image_channel_data_type: channel_type };
        let desc = cl_image_desc {
            image_type: CL_MEM_OBJECT_IMAGE2D,
            image_width: width,
            image_height: height,
            image_depth: 0,
            image_array_size: 0,
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer: ptr::null_mut(),
        };
        // SAFETY: `format` and `desc` are live structs read during the call; no host pointer, so the
        // row pitch must be (and is) 0.
        let mem = unsafe { memory::create_image(context.0, CL_MEM_READ_WRITE, &format, &desc, ptr::null_mut()) }?;
        Ok(Image { mem: Mem(mem), width, height, pixel: 4 * channel_bytes })
    }

    fn check_pitched(&self, pitch: usize, len: usize) -> ClResult<()> {
        let row = self.width.checked_mul(self.pixel).ok_or(CL_INVALID_VALUE)?;
        let total = pitch.checked_mul(self.height).ok_or(CL_INVALID_VALUE)?;
        if pitch < row || len < total {
            return Err(CL_INVALID_VALUE);
        }
        Ok(())
    }
}

impl Program {
    /// A program from OpenCL C source (not built yet).
    pub(crate) fn with_source(context: &Context, source: &str) -> ClResult<Program> {
        program::create_program_with_source(context.0, &[source]).map(Program)
    }

    /// Builds for `device` with `options`, blocking.
    pub(crate) fn build(&self, device: DeviceId, options: &CStr) -> ClResult<()> {
        program::build_program(self.0, &[device.0], options, None, ptr::null_mut())
    }

    /// The built binary for the program's only device (`CL_PROGRAM_BINARIES`).
    pub(crate) fn binary(&self) -> ClResult<Vec<u8>> {
        match program::get_program_info(self.0, opencl_sys::CL_PROGRAM_BINARIES)? {
            cl3::info_type::InfoType::VecVecUchar(mut v) if v.len() == 1 => Ok(v.remove(0)),
            _ => Err(opencl_sys::CL_INVALID_PROGRAM),
        }
    }

    /// The build log for `device` (empty if the driver has none).
    pub(crate) fn build_log(&self, device: DeviceId) -> String {
        program::get_program_build_info(self.0, device.0, CL_PROGRAM_BUILD_LOG).map(String::from).unwrap_or_default()
    }
}

impl Kernel {
    /// A new kernel object for the kernel `name` of a built program.
    pub(crate) fn new(program: &Program, name: &CStr) -> ClResult<Kernel> {
        kernel::create_kernel(program.0, name).map(Kernel)
    }

    /// The number of arguments the kernel declares.
    pub(crate) fn num_args(&self) -> ClResult<u32> {
        kernel::get_kernel_info(self.0, CL_KERNEL_NUM_ARGS).map(cl_uint::from)
    }

    /// The largest work-group this kernel can run with on `device`.
    pub(crate) fn max_work_group(&self, device: DeviceId) -> ClResult<usize> {
        kernel::get_kernel_work_group_info(self.0, device.0, CL_KERNEL_WORK_GROUP_SIZE).map(usize::from)
    }

    /// Binds memory object `mem` (a buffer, a sub-buffer or an image) to argument `index`.
    pub(crate) fn set_mem_arg(&mut self, index: u32, mem: &Mem) -> ClResult<()> {
        let raw: cl_mem = mem.0;
        // SAFETY: `arg_value` points to one live `cl_mem` of the size passed, read during the call;
        // `&mut self` ensures no other thread sets arguments on this kernel concurrently. OpenCL
        // refuses (CL_INVALID_ARG_SIZE / CL_INVALID_MEM_OBJECT) an argument that is not a memory object.
        unsafe {
            kernel::set_kernel_arg(self.0, index, std::mem::size_of::<cl_mem>(), ptr::from_ref(&raw).cast::<c_void>())
        }
    }
}

impl Event {
    /// Blocks until the command completed.
    pub(crate) fn wait(&self) -> ClResult<()> {
        event::wait_for_events(&[self.0])
    }

    /// Nanoseconds between the command's start and end (needs a profiling queue and a completed
    /// command: CL_PROFILING_INFO_NOT_AVAILABLE otherwise).
    pub(crate) fn duration_ns(&self) -> ClResult<u64> {
        let start = u64::from(event::get_event_profiling_info(self.0, CL_PROFILING_COMMAND_START)?);
        let end = u64::from(event::get_event_profiling_info(self.0, CL_PROFILING_COMMAND_END)?);
        Ok(end.saturating_sub(start))
    }
}
