#!/usr/bin/env python3
"""USB transactions of one model step on tinygrad's USB path, derived from its code, for BENCHMARKS.md.

The path: tinygrad 0.14.0's `runtime/support/usb.py` (`usb_stage_copy`, `usb_scsi`, `usb_idle`, `usb_stream`,
`usb_ib`, `usb_push`, `usb_arm_bytes`, `pm_usb_hostio`) as the seed's `ops_amd.py` wires it in (`amd_usb_submit`,
`pm_usb_submit`), scheduled by `runtime/support/hcq2.py` (`sched_hcq_batches`, `_finalize_batch`,
`_build_finalizers`). A step copies each input from the host, runs the kernels, copies each output back.

One USB transaction is one libusb control or bulk transfer. Every polling loop (`usb_idle`, the batch fence) is
counted once, as if its first read saw the value it waits for: the counts are lower bounds.

        python3 scripts/tinygrad_usb_step.py --inputs 768,8,49152 --outputs 2180 [--trace]
"""
import argparse

SRAM = 0x80000  # usb_sram: the bridge SRAM window a staged copy moves through (`USBIface._dma_region`, 512 KB)


def stream(what):
    # usb_stream: a 0xF0 control OUT (mode 1 write / 2 read) and one bulk transfer
    return [f"{what}: F0 control OUT", f"{what}: bulk {'OUT' if 'write' in what else 'IN'}"]


def push(queue):
    # usb_push: the compute queue writes the IB (usb_ib's cmdbuf with its kernargs), then a 4-dword INDIRECT_BUFFER
    # packet into the ring; SDMA writes the cmdbuf into the ring itself; then the write pointer and the doorbell
    ib = stream(f"{queue} IB write") if queue == "COMPUTE" else []
    return ib + stream(f"{queue} ring write") + stream(f"{queue} wptr write") + stream(f"{queue} doorbell write")


def idle():
    # usb_idle: usb_load of the timeline signal (pm_usb_hostio), looped until it reaches timeline_value - 1
    return stream("timeline signal read")


def batch(queues):
    # _finalize_batch for the AMD device group: the hcq_fence (a timeline signal read loop), hcq_reset (one store of
    # 0 per queue slot the batch used, a usb_write each), the merged submit of each queue, then the finalizer's
    # fin_submit on COMPUTE:0 (its waits and the timeline store)
    seq = stream("batch fence: timeline signal read")
    for q in queues:
        seq += stream(f"reset {q} signal slot write")
    for q in queues:
        seq += push(q)
    return seq + push("COMPUTE")


def step(inputs, outputs):
    seq, open_queues = [], []
    # usb_stage_copy, host to device: per SRAM-sized piece a host call hcq_copyin (usb_scsi after usb_idle: an F2
    # arm, then the bulk OUT), then the SDMA copy out of the SRAM, enqueued on COPY:0. A host call closes the batch
    # before it (sched_hcq_batches), so every piece but the last gets a batch of its own.
    for size in inputs:
        for _ in range(0, size, SRAM):
            if open_queues:
                seq += batch(open_queues)
            seq += idle() + ["F2 arm (host to SRAM): control OUT", "input data: bulk OUT"]
            open_queues = ["COPY"]
    # the kernels join the open batch on COMPUTE:0; the next host call (the first hcq_copyout) closes it
    seq += batch(open_queues + ["COMPUTE"])
    # usb_stage_copy, device to host: per piece a host call hcq_copyout: the SDMA submit of the copy into the SRAM
    # with usb_arm_bytes' poke (its usb_ib depends on usb_scsi: usb_idle, the F2 read arm), then the bulk IN. The
    # copy from the bounce buffer to the output is on the CPU device: no USB.
    for size in outputs:
        for _ in range(0, size, SRAM):
            seq += idle() + ["F2 arm (SRAM to host): control OUT"] + push("COPY") + ["output data: bulk IN"]
    return seq


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sizes = lambda s: [int(x) for x in s.split(",") if x]
    p.add_argument("--inputs", type=sizes, default=[], help="bytes of each input, comma-separated")
    p.add_argument("--outputs", type=sizes, default=[], help="bytes of each output, comma-separated")
    p.add_argument("--trace", action="store_true", help="print every transaction")
    a = p.parse_args()
    seq = step(a.inputs, a.outputs)
    if a.trace:
        print("\n".join(f"{i + 1:3d} {t}" for i, t in enumerate(seq)))
    print(len(seq))


if __name__ == "__main__":
    main()
