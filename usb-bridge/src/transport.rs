//! The transport seam: the four USB operations the bridge protocol needs, plus asynchronous bulk OUT.
//! Implemented by libusb ([`crate::usb`]) and by the simulator (`pilot-usb-sim`); nothing above it knows which.

use crate::error::TransferError;
use crate::proto::Setup;
use std::time::Duration;

/// A submitted asynchronous bulk OUT, redeemed once by [`Transport::reap`].
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
pub struct Ticket(pub u64);

/// One opened bridge. Every call either finishes within its `timeout` or fails; none blocks for ever.
pub trait Transport: Send {
    /// `usb:BUS-ADDR`, or `sim`.
    fn name(&self) -> &str;
    /// The iProduct string.
    fn product(&self) -> &str;
    /// The open sequence: detach a kernel driver (then reset the device), configuration 1, interface 0, alt 0.
    /// The firmware cancels any streaming transfer and clears both bulk endpoints on it.
    fn claim(&mut self) -> Result<(), TransferError>;
    /// A control IN; returns the bytes received (possibly fewer than `buf.len()`).
    fn control_in(&mut self, setup: Setup, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError>;
    fn control_out(&mut self, setup: Setup, data: &[u8], timeout: Duration) -> Result<(), TransferError>;
    /// A bulk IN; returns the bytes received.
    fn bulk_in(&mut self, ep: u8, buf: &mut [u8], timeout: Duration) -> Result<usize, TransferError>;
    /// A bulk OUT; returns the bytes sent.
    fn bulk_out(&mut self, ep: u8, data: &[u8], timeout: Duration) -> Result<usize, TransferError>;
    /// Queues a bulk OUT and returns at once. Transfers on one endpoint reach the device in submission order.
    fn submit_bulk_out(&mut self, ep: u8, data: Vec<u8>, timeout: Duration) -> Result<Ticket, TransferError>;
    /// Waits for a submitted bulk OUT; returns the bytes sent and the buffer for reuse.
    fn reap(&mut self, ticket: Ticket) -> Result<(usize, Vec<u8>), TransferError>;
    /// A monotonic clock in this transport's time: wall time for hardware, modelled time for the simulator.
    /// Every deadline above the seam is measured with it.
    fn now(&self) -> Duration;
    /// Waits `d` in this transport's time.
    fn sleep(&mut self, d: Duration);
}
