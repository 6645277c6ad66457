//! The real transport: libusb through `rusb`. Discovery by VID:PID, the open sequence of tinygrad's
//! `USB3.__init__`, synchronous transfers, and asynchronous bulk OUT on a worker thread.

use crate::error::{Error, Result, TransferError};
use crate::lock::BridgeLock;
use crate::proto::{self, Setup};
use crate::transport::{Ticket, Transport};
use rusb::{Context, DeviceHandle, UsbContext};
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A bridge found on the bus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub bus: u8,
    pub address: u8,
    pub vid: u16,
    pub pid: u16,
    /// The iProduct string, or why it could not be read.
    pub product: std::result::Result<String, String>,
}

impl Found {
    /// `usb:BUS-ADDR`.
    pub fn name(&self) -> String {
        format!("usb:{}-{}", self.bus, self.address)
    }
}

fn kind(e: rusb::Error) -> TransferError {
    match e {
        rusb::Error::Timeout => TransferError::Timeout(Duration::ZERO),
        rusb::Error::Pipe => TransferError::Stall,
        rusb::Error::NoDevice => TransferError::NoDevice,
        rusb::Error::Overflow => TransferError::Overflow,
        other => TransferError::Other(other.to_string()),
    }
}

fn with_timeout(e: rusb::Error, timeout: Duration) -> TransferError {
    match kind(e) {
        TransferError::Timeout(_) => TransferError::Timeout(timeout),
        k => k,
    }
}

fn ids() -> String {
    proto::BRIDGE_IDS.iter().map(|(v, p)| format!("{v:04x}:{p:04x}")).collect::<Vec<_>>().join(", ")
}

/// A libusb context; a machine where libusb cannot start (no USB at all) has no bridge.
fn context() -> Result<Context> {
    Context::new().map_err(|e| Error::NotFound { ids: format!("{}; libusb cannot start: {e}", ids()) })
}

/// Bridges with a known VID:PID, in [`proto::BRIDGE_IDS`] order.
pub fn list() -> Result<Vec<Found>> {
    let devices = context()?.devices().map_err(|e| Error::Transfer {
        device: "usb".into(),
        op: "list devices".into(),
        kind: kind(e),
    })?;
    let mut found = Vec::new();
    for &(vid, pid) in &proto::BRIDGE_IDS {
        for d in devices.iter() {
            let Ok(desc) = d.device_descriptor() else { continue };
            if (desc.vendor_id(), desc.product_id()) != (vid, pid) {
                continue;
            }
            let product = d
                .open()
                .and_then(|h| h.read_product_string_ascii(&desc))
                .map_err(|e| format!("cannot read the product string: {e}"));
            found.push(Found { bus: d.bus_number(), address: d.address(), vid, pid, product });
        }
    }
    Ok(found)
}

/// Opens `usb:BUS-ADDR` (or the first bridge found when `which` is `None`) and takes its lock.
pub fn open(which: Option<(u8, u8)>) -> Result<(Box<dyn Transport>, BridgeLock)> {
    let ids = ids();
    let all = list()?;
    let f = match which {
        Some((bus, addr)) => all.into_iter().find(|f| (f.bus, f.address) == (bus, addr)),
        None => all.into_iter().next(),
    }
    .ok_or_else(|| Error::NotFound {
        ids: match which {
            Some((b, a)) => format!("usb:{b}-{a} with {ids}"),
            None => ids.clone(),
        },
    })?;
    let name = f.name();
    let lock = BridgeLock::acquire(&name, f.bus, f.address)?;
    let usb_err = |op: &str, e: rusb::Error| Error::Transfer { device: name.clone(), op: op.into(), kind: kind(e) };
    let devices = context()?.devices().map_err(|e| usb_err("list devices", e))?;
    let dev = devices
        .iter()
        .find(|d| (d.bus_number(), d.address()) == (f.bus, f.address))
        .ok_or_else(|| Error::NotFound { ids: name.clone() })?;
    let handle = dev.open().map_err(|e| usb_err("open", e))?;
    if handle.kernel_driver_active(proto::INTERFACE).unwrap_or(false) {
        handle.detach_kernel_driver(proto::INTERFACE).map_err(|e| usb_err("detach kernel driver", e))?;
        handle.reset().map_err(|e| usb_err("reset", e))?;
    }
    let desc = dev.device_descriptor().map_err(|e| usb_err("device descriptor", e))?;
    let product = handle.read_product_string_ascii(&desc).map_err(|e| usb_err("product string", e))?;
    let t = RusbTransport::new(name, product, handle);
    Ok((Box::new(t), lock))
}

type Job = (u64, u8, Vec<u8>, Duration);
type Done = (u64, std::result::Result<usize, TransferError>, Vec<u8>);

/// A bridge opened through libusb.
pub struct RusbTransport {
    name: String,
    product: String,
    handle: Arc<DeviceHandle<Context>>,
    epoch: Instant,
    jobs: Option<Sender<Job>>,
    done_rx: Receiver<Done>,
    worker: Option<JoinHandle<()>>,
    finished: HashMap<u64, (std::result::Result<usize, TransferError>, Vec<u8>)>,
    next_ticket: u64,
}

impl RusbTransport {
    fn new(name: String, product: String, handle: DeviceHandle<Context>) -> RusbTransport {
        let handle = Arc::new(handle);
        let (jobs, job_rx) = channel::<Job>();
        let (done_tx, done_rx) = channel::<Done>();
        let h = Arc::clone(&handle);
        // One worker serves asynchronous bulk OUTs in submission order, so they reach the device in order while
        // the caller goes on with control transfers.
        let worker = std::thread::spawn(move || {
            for (id, ep, data, timeout) in job_rx {
                let r = h.write_bulk(ep, &data, timeout).map_err(|e| with_timeout(e, timeout));
                if done_tx.send((id, r, data)).is_err() {
                    return;
                }
            }
        });
        RusbTransport {
            name,
            product,
            handle,
            epoch: Instant::now(),
            jobs: Some(jobs),
            done_rx,
            worker: Some(worker),
            finished: HashMap::new(),
            next_ticket: 0,
        }
    }
}

impl Transport for RusbTransport {
    fn name(&self) -> &str {
        &self.name
    }

    fn product(&self) -> &str {
        &self.product
    }

    /// The kernel driver was detached (and the device reset) by [`open`], before the handle was shared.
    fn claim(&mut self) -> Result<(), TransferError> {
        let h = &self.handle;
        h.set_active_configuration(proto::CONFIGURATION).map_err(kind)?;
        h.claim_interface(proto::INTERFACE).map_err(kind)?;
        h.set_alternate_setting(proto::INTERFACE, proto::ALT_SETTING).map_err(kind)
    }

    fn control_in(&mut self, s: Setup, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        self.handle
            .read_control(s.request_type, s.request, s.value, s.index, buf, timeout)
            .map_err(|e| with_timeout(e, timeout))
    }

    fn control_out(&mut self, s: Setup, data: &[u8], timeout: Duration) -> Result<(), TransferError> {
        let n = self
            .handle
            .write_control(s.request_type, s.request, s.value, s.index, data, timeout)
            .map_err(|e| with_timeout(e, timeout))?;
        if n != data.len() {
            return Err(TransferError::Other(format!("control OUT sent {n} of {} bytes", data.len())));
        }
        Ok(())
    }

    fn bulk_in(&mut self, ep: u8, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError> {
        self.handle.read_bulk(ep, buf, timeout).map_err(|e| with_timeout(e, timeout))
    }

    fn bulk_out(&mut self, ep: u8, data: &[u8], timeout: Duration) -> Result<usize, TransferError> {
        self.handle.write_bulk(ep, data, timeout).map_err(|e| with_timeout(e, timeout))
    }

    fn submit_bulk_out(&mut self, ep: u8, data: Vec<u8>, timeout: Duration) -> Result<Ticket, TransferError> {
        let id = self.next_ticket;
        self.next_ticket += 1;
        let jobs = self.jobs.as_ref().ok_or_else(|| TransferError::Other("transport closed".into()))?;
        jobs.send((id, ep, data, timeout)).map_err(|_| TransferError::Other("bulk worker gone".into()))?;
        Ok(Ticket(id))
    }

    fn reap(&mut self, ticket: Ticket) -> Result<(usize, Vec<u8>), TransferError> {
        loop {
            if let Some((r, buf)) = self.finished.remove(&ticket.0) {
                return r.map(|n| (n, buf));
            }
            if ticket.0 >= self.next_ticket {
                return Err(TransferError::Other(format!("unknown transfer {}", ticket.0)));
            }
            // The worker finishes every job within its own timeout, so this wait is bounded.
            let (id, r, buf) = self.done_rx.recv().map_err(|_| TransferError::Other("bulk worker gone".into()))?;
            self.finished.insert(id, (r, buf));
        }
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d)
    }
}

impl Drop for RusbTransport {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        let _ = self.handle.release_interface(proto::INTERFACE);
    }
}

/// Reads a bridge's LTSSM state (a device-recipient E4, no interface claimed) under its lock; only for the
/// custom firmware, whose vendor requests these are.
pub fn read_ltssm(f: &Found) -> Result<u8> {
    let name = f.name();
    let product = f.product.as_deref().unwrap_or("");
    if !proto::PRODUCT_PREFIXES.iter().any(|p| product.starts_with(p)) {
        return Err(Error::WrongFirmware { device: name, product: product.to_string() });
    }
    let _lock = BridgeLock::acquire(&name, f.bus, f.address)?;
    let err = |op: &str, kind| Error::Transfer { device: name.clone(), op: op.into(), kind };
    let devices = context()?.devices().map_err(|e| err("list devices", self::kind(e)))?;
    let dev = devices
        .iter()
        .find(|d| (d.bus_number(), d.address()) == (f.bus, f.address))
        .ok_or_else(|| err("open", TransferError::NoDevice))?;
    let h = dev.open().map_err(|e| err("open", self::kind(e)))?;
    let s = proto::xdata_read_setup(proto::xdata::LTSSM);
    let mut b = [0u8; 1];
    let n = h
        .read_control(s.request_type, s.request, s.value, s.index, &mut b, proto::timeout::CONTROL)
        .map_err(|e| err("XDATA read (E4)", with_timeout(e, proto::timeout::CONTROL)))?;
    if n != 1 {
        return Err(Error::Short { device: name, op: "XDATA read (E4)".into(), expected: 1, got: n });
    }
    Ok(b[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let f = Found { bus: 3, address: 7, vid: 0xADD1, pid: 1, product: Ok("custom".into()) };
        assert_eq!(f.name(), "usb:3-7");
        let stock = Found { product: Ok("ASM2464PD".into()), ..f };
        assert!(matches!(read_ltssm(&stock), Err(Error::WrongFirmware { .. })));
    }
}
