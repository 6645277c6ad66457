//! Queues made from registers, and running them on doorbell writes: a PM4 (compute) queue counts its
//! doorbell value in dwords, an SDMA queue in bytes (tinygrad `AMDComputeQueue`, `AMDCopyQueue`). A queue
//! runs from its read pointer to the doorbell's write pointer; a packet that waits (WAIT_REG_MEM,
//! POLL_REGMEM not yet true) leaves it stalled there until the next event (a doorbell, a host write); a fault
//! stops it for good (its signal never arrives) and is recorded with the packet's offset.

use super::mem::Fabric;
use super::Gpu;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pm4,
    Sdma,
}

/// An indirect buffer being run (PM4): where it is and how far.
#[derive(Clone, Copy, Debug)]
pub struct Ib {
    pub addr: u64,
    pub bytes: u64,
    pub pos: u64,
}

#[derive(Clone, Debug)]
pub struct Queue {
    pub kind: Kind,
    pub name: String,
    pub base: u64,
    pub bytes: u64,
    /// Bytes consumed, ever (the ring offset is this modulo `bytes`).
    pub rptr: u64,
    pub wptr: u64,
    /// BAR2 byte offset of the queue's doorbell.
    pub doorbell: u32,
    pub rptr_addr: u64,
    pub stopped: bool,
    pub ib: Option<Ib>,
    /// When the engine finishes what it was given (modelled).
    pub busy_until: Duration,
}

/// What one packet did.
pub enum Step {
    /// Consumed this many bytes.
    Done(u64),
    /// Start this indirect buffer (the ring packet is consumed when it ends).
    Ib(Ib),
    /// Waits on a condition; run again later from the same packet.
    Stall,
}

impl Queue {
    #[allow(clippy::too_many_arguments)]
    pub fn new(kind: Kind, name: String, base: u64, bytes: u64, rptr: u64, doorbell: u32, rptr_addr: u64) -> Queue {
        Queue {
            kind,
            name,
            base,
            bytes,
            rptr,
            wptr: rptr,
            doorbell,
            rptr_addr,
            stopped: false,
            ib: None,
            busy_until: Duration::ZERO,
        }
    }
}

/// The PM4 INDIRECT_BUFFER packet's size in the ring, in bytes.
pub const IB_PACKET_BYTES: u64 = 16;

impl Gpu {
    /// A doorbell write at BAR2 byte `byte`: the queue it belongs to gets a new write pointer and runs.
    pub(super) fn ring_doorbell(&mut self, byte: u32, fabric: &mut dyn Fabric) {
        let slot = byte & !7;
        let value = u64::from(self.read_doorbell(slot)) | u64::from(self.read_doorbell(slot + 4)) << 32;
        let Some(q) = self.queues.iter_mut().find(|q| q.doorbell == slot) else {
            return self.fault("doorbell", None, format!("BAR2 offset {slot:#x} belongs to no active queue"));
        };
        q.wptr = match q.kind {
            Kind::Pm4 => value * 4,
            Kind::Sdma => value,
        };
        self.run_queues(fabric);
    }

    /// Runs every queue as far as it goes.
    pub(super) fn run_queues(&mut self, fabric: &mut dyn Fabric) {
        let mut queues = std::mem::take(&mut self.queues);
        self.rings = queues.iter().map(|q| (q.base, q.bytes, q.rptr_addr)).collect();
        for q in queues.iter_mut().filter(|q| !q.stopped) {
            q.busy_until = q.busy_until.max(self.now);
            self.run_queue(q, fabric);
        }
        let created = std::mem::replace(&mut self.queues, queues);
        self.queues.extend(created);
    }

    fn run_queue(&mut self, q: &mut Queue, fabric: &mut dyn Fabric) {
        let mut progressed = false;
        loop {
            let (at, in_ib) = match q.ib {
                Some(ib) if ib.pos >= ib.bytes => {
                    q.ib = None;
                    q.rptr += IB_PACKET_BYTES;
                    continue;
                }
                Some(ib) => (ib.addr + ib.pos, true),
                None if q.rptr >= q.wptr => break,
                None => (q.rptr, false),
            };
            let step = match q.kind {
                Kind::Pm4 => self.pm4_packet(q, at, in_ib, fabric),
                Kind::Sdma => self.sdma_packet(q, at, fabric),
            };
            let offset = if in_ib { at - q.ib.map_or(0, |ib| ib.addr) } else { at % q.bytes };
            match step {
                Ok(Step::Done(n)) => {
                    progressed = true;
                    match q.ib.as_mut() {
                        Some(ib) => ib.pos += n,
                        None => q.rptr += n,
                    }
                }
                Ok(Step::Ib(ib)) if !in_ib => {
                    progressed = true;
                    q.ib = Some(ib);
                }
                Ok(Step::Ib(_)) => {
                    q.stopped = true;
                    let reason = "INDIRECT_BUFFER inside an indirect buffer (chaining is not modelled)";
                    self.fault(q.name.clone(), Some(offset), format!("in the indirect buffer: {reason}"));
                    break;
                }
                Ok(Step::Stall) => break,
                Err(reason) => {
                    q.stopped = true;
                    let place = if in_ib { "in the indirect buffer: " } else { "" };
                    self.fault(q.name.clone(), Some(offset), format!("{place}{reason}"));
                    break;
                }
            }
        }
        if progressed && q.rptr_addr != 0 {
            // PM4 reports dwords, SDMA bytes.
            let v = match q.kind {
                Kind::Pm4 => q.rptr / 4,
                Kind::Sdma => q.rptr,
            };
            let at = q.busy_until;
            if let Err(e) = self.mem(super::mem::Hub::Gc, fabric, at).write64(q.rptr_addr, v) {
                q.stopped = true;
                self.fault(q.name.clone(), None, format!("rptr write-back: {e}"));
            }
        }
    }

    /// Reads `n` dwords at `at`: from the ring (wrapping) or, in an indirect buffer, straight.
    pub(super) fn fetch(
        &self,
        q: &Queue,
        at: u64,
        n: usize,
        in_ib: bool,
        fabric: &mut dyn Fabric,
    ) -> Result<Vec<u32>, String> {
        let mut mem = self.mem(super::mem::Hub::Gc, fabric, q.busy_until);
        let mut out = Vec::with_capacity(n);
        for i in 0..n as u64 {
            let addr = if in_ib { at + 4 * i } else { q.base + (at + 4 * i) % q.bytes };
            out.push(mem.read32(addr)?);
        }
        Ok(out)
    }
}
