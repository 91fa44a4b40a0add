//! In-flight budgets: how many bytes of requests the gateway holds for each tenant and
//! each connection, and what a request is charged.
//!
//! **What it guards.** Every request the gateway has taken and not yet answered costs
//! memory: a write's payload while it waits for the policy, a read's data once the
//! backend returned it and until the client takes the reply. A client that sends
//! requests and reads no reply makes that memory grow for as long as it goes on, so
//! every request is charged to a budget before the gateway takes it, and the charge is
//! given back only once the reply is written to the client's socket. When a budget is
//! spent, the connection's reader waits: the client's requests stay in its own socket
//! buffers, not in the gateway's memory.
//!
//! **Whose budget.** One budget for the whole gateway let one tenant stop every other:
//! five connections sending 4 KiB reads and reading no reply used up the 256 MiB and
//! every later request of every tenant waited. So the budget is divided: each tenant
//! served has a share of its own, `max_inflight / tenants` (tenants = those with an
//! export, and those whose connections are still open), so the sum over the tenants
//! is `max_inflight`, the process-wide bound, and no tenant's requests can wait for
//! another's unread replies. Inside a tenant, each connection has a share too, half its
//! tenant's (at most [`MAX_CONNECTION_SHARE`]): one connection that reads no reply
//! leaves its tenant's other connections the other half. Every share holds at least
//! [`MIN_SHARE`], one request of the largest size with its charge, or such a request
//! could never be taken; when `max_inflight` is too small for that (more than 8 tenants
//! at the default 256 MiB), each tenant gets [`MIN_SHARE`] and the bound is
//! `tenants × MIN_SHARE`, which is said once in the log.
//!
//! **What a request is charged.** Its data, in bytes, plus [`REQUEST_CHARGE`] for what
//! the gateway keeps of any request (the job, the policy's entry, the reply): a 4 KiB
//! read is charged 5 KiB, a flush 1 KiB. The old charge of at least 64 KiB a request
//! made 4 KiB requests cost 16 times their size: 14 MiB of real data held the whole
//! 256 MiB. A read is charged its length before it is queued (the reply's buffer is
//! what it will hold); a write's payload is charged as it arrives, one piece of at most
//! [`PAYLOAD_PIECE`] before each is read, so a client that sends a 32 MiB write's
//! header and 1,000 bytes holds 64 KiB, not 32 MiB.
//!
//! **Idle.** A connection that holds nothing of its budget has nothing in flight: no
//! request queued or on the backend, no reply unwritten, no payload half received
//! ([`ConnectionBudget::is_idle`]); such a connection may be closed to make room for a
//! newcomer (`crate::peer_limits`) without losing anything a client was promised.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::protocol::MAX_IO_BYTES;

/// What any request is charged beside its data: a bound on what the gateway keeps of a
/// request besides its data (its job, its reply, the policy's request and completion:
/// 360 bytes on x86-64, see the test `the_request_charge_covers_what_a_request_keeps`;
/// then the policy's queue entry and the channels' slots), rounded up to 1 KiB.
pub const REQUEST_CHARGE: u32 = 1 << 10;

/// A write's payload is charged and read in pieces of at most this many bytes (the
/// connection's read buffer, 64 KiB): what a write whose payload stops holds beyond
/// what it sent.
pub const PAYLOAD_PIECE: u32 = 64 << 10;

/// The largest share of one connection: 64 MiB, the per-connection bound the gateway
/// always had (64 requests of 1 MiB, or nbdcopy's 64 requests of 256 KiB four times over).
pub const MAX_CONNECTION_SHARE: u64 = 64 << 20;

/// The smallest share of a tenant or a connection: one request of the largest size
/// (32 MiB) with its charge.
pub const MIN_SHARE: u64 = MAX_IO_BYTES as u64 + REQUEST_CHARGE as u64;

/// What a request of `data` bytes is charged.
pub fn charge(data: u32) -> u32 {
    data.saturating_add(REQUEST_CHARGE)
}

/// The share of each of `tenants` tenants dividing `total` bytes.
pub fn tenant_share(total: u64, tenants: usize) -> u64 {
    (total / tenants.max(1) as u64).max(MIN_SHARE)
}

/// The share of each connection of a tenant whose share is `tenant`.
pub fn connection_share(tenant: u64) -> u64 {
    (tenant / 2).clamp(MIN_SHARE, MAX_CONNECTION_SHARE)
}

/// A request's charge, to its connection's share and its tenant's: given back when
/// dropped (once its reply is written to the client).
#[derive(Debug)]
pub struct Inflight {
    connection: OwnedSemaphorePermit,
    tenant: OwnedSemaphorePermit,
}

impl Inflight {
    /// Add `more` (a charge to the same connection) to this one.
    pub fn merge(&mut self, more: Inflight) {
        self.connection.merge(more.connection);
        self.tenant.merge(more.tenant);
    }

    /// The bytes charged.
    pub fn bytes(&self) -> usize {
        self.connection.num_permits()
    }
}

/// One tenant's share.
struct Account {
    sem: Arc<Semaphore>,
    share: u64,
}

impl Account {
    fn new(share: u64) -> Account {
        Account { sem: Arc::new(Semaphore::new(permits(share))), share }
    }

    /// Whether a connection or an unanswered request still uses it.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.sem) > 1
    }

    /// Make the share `share`: more permits at once, fewer as the charges held come
    /// back (the permits missing are taken, in turn with the requests waiting, and
    /// forgotten).
    fn resize(&mut self, share: u64) {
        let (old, new) = (permits(self.share), permits(share));
        self.share = share;
        if new > old {
            self.sem.add_permits(new - old);
            return;
        }
        let mut debt = (old - new).saturating_sub(self.sem.forget_permits(old - new));
        if debt == 0 {
            return;
        }
        let sem = self.sem.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                while debt > 0 {
                    let n = debt.min(u32::MAX as usize) as u32;
                    match sem.acquire_many(n).await {
                        Ok(p) => p.forget(),
                        Err(_) => return,
                    }
                    debt -= n as usize;
                }
            });
        }
    }
}

fn permits(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS)
}

struct Divided {
    accounts: HashMap<u32, Account>,
    /// How many tenants the shares are divided among.
    among: usize,
}

/// The gateway's in-flight budget, divided among its tenants.
pub struct Budgets {
    total: u64,
    state: Mutex<Divided>,
}

impl Budgets {
    /// A budget of `total` bytes (the configuration's `max_inflight`).
    pub fn new(total: u64) -> Budgets {
        Budgets { total, state: Mutex::new(Divided { accounts: HashMap::new(), among: 0 }) }
    }

    /// The process-wide bound: `max_inflight`, or `tenants × MIN_SHARE` when that is more.
    pub fn bound(&self, tenants: usize) -> u64 {
        tenant_share(self.total, tenants) * tenants.max(1) as u64
    }

    /// Divide the budget among the tenants `served` (those with an export) and those
    /// whose connections still hold a share. Returns a line to log when the division
    /// changed and leaves the tenants less than one request of the largest size each.
    pub fn divide(&self, served: impl IntoIterator<Item = u32>) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.divide_locked(&mut state, served.into_iter().collect())
    }

    fn divide_locked(&self, state: &mut Divided, mut tenants: BTreeSet<u32>) -> Option<String> {
        state.accounts.retain(|_, a| a.in_use());
        tenants.extend(state.accounts.keys().copied());
        let n = tenants.len().max(1);
        if n == state.among {
            return None;
        }
        state.among = n;
        let share = tenant_share(self.total, n);
        for a in state.accounts.values_mut() {
            a.resize(share);
        }
        (self.total / (n as u64) < u64::from(MAX_IO_BYTES)).then(|| {
            format!(
                "limits.max_inflight: {} MiB over {n} tenants is less than one request of the largest size \
                 (32 MiB) each; each tenant gets {:.0} MiB, {:.0} MiB in all (give max_inflight at least that)",
                self.total >> 20,
                share as f64 / f64::from(1 << 20),
                (share * n as u64) as f64 / f64::from(1 << 20),
            )
        })
    }

    /// The budget of a new connection of `tenant`, its tenant's share divided among the
    /// tenants `served` now (see [`Budgets::divide`], whose line it returns).
    pub fn connection(&self, tenant: u32, served: impl IntoIterator<Item = u32>) -> (ConnectionBudget, Option<String>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut tenants: BTreeSet<u32> = served.into_iter().collect();
        tenants.insert(tenant);
        let said = self.divide_locked(&mut state, tenants);
        let share = tenant_share(self.total, state.among);
        let account = state.accounts.entry(tenant).or_insert_with(|| Account::new(share));
        let capacity = permits(connection_share(account.share));
        let budget = ConnectionBudget {
            connection: Arc::new(Semaphore::new(capacity)),
            capacity,
            tenant: account.sem.clone(),
            tenant_share: account.share,
        };
        (budget, said)
    }
}

/// One connection's budget, and its tenant's.
pub struct ConnectionBudget {
    connection: Arc<Semaphore>,
    capacity: usize,
    tenant: Arc<Semaphore>,
    tenant_share: u64,
}

impl ConnectionBudget {
    /// Take `bytes` (at most the connection's share) from the connection's share, then
    /// from its tenant's, waiting for replies to be written while either is spent;
    /// `on_tenant_wait` is called when the tenant's share is what makes it wait. `None`
    /// once the gateway is stopping.
    pub async fn take(&self, bytes: u32, on_tenant_wait: impl FnOnce()) -> Option<Inflight> {
        let bytes = bytes.min(u32::try_from(self.capacity).unwrap_or(u32::MAX));
        let connection = self.connection.clone().acquire_many_owned(bytes).await.ok()?;
        let tenant = match self.tenant.clone().try_acquire_many_owned(bytes) {
            Ok(p) => p,
            Err(_) => {
                on_tenant_wait();
                self.tenant.clone().acquire_many_owned(bytes).await.ok()?
            }
        };
        Some(Inflight { connection, tenant })
    }

    /// Whether the connection holds nothing: no request in flight, no reply unwritten,
    /// no payload half received.
    pub fn is_idle(&self) -> bool {
        self.connection.available_permits() == self.capacity
    }

    /// The connection's share (bytes).
    pub fn capacity(&self) -> u64 {
        self.capacity as u64
    }

    /// Its tenant's share when the connection opened (bytes).
    pub fn tenant_share(&self) -> u64 {
        self.tenant_share
    }
}

impl crate::peer_limits::Activity for ConnectionBudget {
    fn is_idle(&self) -> bool {
        ConnectionBudget::is_idle(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn shares_divide_max_inflight_and_hold_one_largest_request() {
        // Two tenants of the default 256 MiB: 128 MiB each, 64 MiB a connection.
        assert_eq!(tenant_share(256 * MIB, 2), 128 * MIB);
        assert_eq!(connection_share(128 * MIB), 64 * MIB);
        // One tenant: all of it, but a connection never more than 64 MiB.
        assert_eq!(tenant_share(256 * MIB, 1), 256 * MIB);
        assert_eq!(connection_share(256 * MIB), 64 * MIB);
        // Four tenants: 64 MiB each, half a tenant's a connection.
        assert_eq!(connection_share(tenant_share(256 * MIB, 4)), 32 * MIB + 1024);
        // Ten tenants: 25.6 MiB each is less than one 32 MiB request: each gets that.
        assert_eq!(tenant_share(256 * MIB, 10), 32 * MIB + 1024);
        assert_eq!(Budgets::new(256 * MIB).bound(10), 10 * (32 * MIB + 1024));
        assert_eq!(Budgets::new(256 * MIB).bound(2), 256 * MIB);
        assert_eq!(charge(4096), 5120);
        assert_eq!(charge(0), 1024);
    }

    #[test]
    fn the_request_charge_covers_what_a_request_keeps() {
        use std::mem::size_of;
        let kept = size_of::<crate::message::Job>()
            + size_of::<crate::message::Reply>()
            + size_of::<storqos_core::request::Request>()
            + size_of::<storqos_core::request::Completion>();
        // Half of the charge is left for the policy's queue entry and the channels' slots.
        assert!(kept <= REQUEST_CHARGE as usize / 2, "{kept} bytes kept per request");
    }

    #[tokio::test]
    async fn one_tenant_spending_its_share_leaves_the_others_theirs() {
        let b = Budgets::new(128 * MIB);
        // Tenant 1 spends its whole share (64 MiB) over three connections of 32 MiB + 1 KiB.
        let (c1, said) = b.connection(1, [0, 1]);
        assert!(said.is_none());
        assert_eq!((c1.tenant_share(), c1.capacity()), (64 * MIB, 32 * MIB + 1024));
        let (c2, _) = b.connection(1, [0, 1]);
        let (c3, _) = b.connection(1, [0, 1]);
        let mut held = Vec::new();
        for c in [&c1, &c2, &c3] {
            while let Ok(Some(p)) = tokio::time::timeout(std::time::Duration::ZERO, c.take(charge(4096), || {})).await {
                held.push(p);
            }
        }
        let spent = held.iter().map(Inflight::bytes).sum::<usize>() as u64;
        assert!(spent <= 64 * MIB && 64 * MIB - spent < 5120, "tenant 1 holds its share: {spent}");
        // A fourth connection of tenant 1 waits, and says so...
        let (c4, _) = b.connection(1, [0, 1]);
        let mut waited = false;
        let fourth = tokio::time::timeout(std::time::Duration::from_millis(1), c4.take(charge(4096), || waited = true));
        assert!(fourth.await.is_err() && waited);
        // ...while tenant 0 takes a whole largest request at once, and more.
        let (v, _) = b.connection(0, [0, 1]);
        let big = v.take(charge(MAX_IO_BYTES), || panic!("tenant 0 waited")).await.unwrap();
        assert_eq!(big.bytes() as u64, MIN_SHARE);
        assert!(!v.is_idle());
        drop(big);
        assert!(v.is_idle());
        // Replies written: tenant 1's share comes back.
        drop(held);
        assert!(c1.is_idle() && c4.take(charge(4096), || panic!("still spent")).await.is_some());
    }

    #[tokio::test]
    async fn one_connection_spending_its_share_leaves_its_tenant_the_rest() {
        let b = Budgets::new(256 * MIB);
        let (bad, _) = b.connection(0, [0, 1]);
        let (good, _) = b.connection(0, [0, 1]);
        assert_eq!(bad.capacity(), 64 * MIB);
        let mut held = Vec::new();
        while let Ok(Some(p)) =
            tokio::time::timeout(std::time::Duration::ZERO, bad.take(PAYLOAD_PIECE, || panic!("tenant spent"))).await
        {
            held.push(p);
        }
        assert_eq!(held.iter().map(Inflight::bytes).sum::<usize>() as u64, 64 * MIB);
        // The good connection of the same tenant still takes 64 MiB.
        for _ in 0..(64 * MIB / u64::from(PAYLOAD_PIECE)) {
            held.push(good.take(PAYLOAD_PIECE, || panic!("tenant spent")).await.unwrap());
        }
    }

    #[tokio::test]
    async fn pieces_merge_into_one_charge() {
        let b = Budgets::new(256 * MIB);
        let (c, _) = b.connection(0, [0]);
        let mut p = c.take(REQUEST_CHARGE, || {}).await.unwrap();
        for _ in 0..3 {
            p.merge(c.take(PAYLOAD_PIECE, || {}).await.unwrap());
        }
        assert_eq!(p.bytes(), 1024 + 3 * 65536);
        assert_eq!(c.connection.available_permits(), c.capacity - p.bytes());
        drop(p);
        assert!(c.is_idle());
    }

    #[tokio::test]
    async fn more_tenants_shrink_the_shares_as_charges_come_back() {
        let b = Budgets::new(256 * MIB);
        let (a, said) = b.connection(0, [0]);
        assert!(said.is_none());
        assert_eq!(a.tenant_share(), 256 * MIB);
        let held = a.take(charge(MAX_IO_BYTES), || {}).await.unwrap();
        // A second tenant appears (an export added): both get 128 MiB.
        let (c, _) = b.connection(1, [0, 1]);
        assert_eq!(c.tenant_share(), 128 * MIB);
        tokio::task::yield_now().await;
        assert_eq!(a.tenant.available_permits() as u64, 128 * MIB - MIN_SHARE);
        drop(held);
        tokio::task::yield_now().await;
        assert_eq!(a.tenant.available_permits() as u64, 128 * MIB);
        // Nine more tenants: each gets one largest request, and the line says so.
        let (_d, said) = b.connection(10, 0..11);
        let said = said.expect("the shares fell below one request");
        assert!(said.contains("256 MiB over 11 tenants") && said.contains("352 MiB in all"), "{said}");
        // A tenant whose connections are all gone no longer counts.
        drop((a, c));
        let (e, _) = b.connection(10, [10]);
        assert_eq!((b.state.lock().unwrap().among, e.tenant_share()), (1, 256 * MIB));
    }
}
