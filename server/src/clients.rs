//! Per-client bounds on connections (settings `serve.max_connections_per_client`
//! and `serve.max_pending_connections_per_client`), so that one client —
//! one IP address, or one IPv6 /64 — cannot take the server's
//! `max_connections` slots from the others, however it holds them:
//! connections that never finish their head, uploads that stop sending, or
//! many idle ones. The connection layer ([`crate::listener`]) counts each
//! accepted connection here and refuses those beyond a bound with 429;
//! hyper's header timeout and the body's minimum rate then end the held
//! ones, so the client's count falls again.
//!
//! The limiting crates of the hyper / tower world (tower's ConcurrencyLimit,
//! tower_governor) count requests, not the connections a client holds
//! before any request of theirs exists, hence these few counters.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The client a connection counts against: its IP address, or for IPv6 its
/// /64 (one subscriber's network, which holds 2^64 addresses of its own).
fn client_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u64::MAX as u128))),
        v4 => v4,
    }
}

#[derive(Debug, Default)]
struct Count {
    open: u32,
    /// Of those, the ones that have not yet sent a whole request.
    pending: u32,
    /// Whether a refusal of this client was logged (once while it holds
    /// connections: an attack would otherwise write a line per connection).
    refusal_logged: bool,
}

/// The connections each client holds.
pub(crate) struct Clients {
    max_open: u32,
    max_pending: u32,
    counts: Mutex<HashMap<IpAddr, Count>>,
}

impl Clients {
    pub(crate) fn new(max_open: u32, max_pending: u32) -> Arc<Clients> {
        Arc::new(Clients { max_open, max_pending, counts: Mutex::default() })
    }

    fn counts(&self) -> MutexGuard<'_, HashMap<IpAddr, Count>> {
        // The counts stay consistent whatever panicked: every change is one statement.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a connection just accepted from `ip` (open, and pending until
    /// its first request has arrived), or says which bound refuses it.
    pub(crate) fn admit(self: &Arc<Clients>, ip: IpAddr) -> Result<ClientConnection, String> {
        let client = client_of(ip);
        let mut counts = self.counts();
        let count = counts.entry(client).or_default();
        let refusal = if count.open >= self.max_open {
            Some(format!(
                "{client} holds {} connections, the most one client may (settings serve.max_connections_per_client)",
                count.open
            ))
        } else if count.pending >= self.max_pending {
            Some(format!(
                "{client} holds {} connections that have not yet sent a whole request, the most one client may (settings serve.max_pending_connections_per_client)",
                count.pending
            ))
        } else {
            None
        };
        match refusal {
            Some(why) => {
                // Refused clients hold connections, so their entry is never empty here.
                if !std::mem::replace(&mut count.refusal_logged, true) {
                    tracing::warn!("refusing connections: {why}");
                }
                Err(why)
            }
            None => {
                count.open += 1;
                count.pending += 1;
                Ok(ClientConnection { clients: self.clone(), client, pending: AtomicBool::new(true) })
            }
        }
    }

    /// The connections `ip`'s client holds: (open, pending).
    #[cfg(test)]
    fn held(&self, ip: IpAddr) -> (u32, u32) {
        self.counts().get(&client_of(ip)).map_or((0, 0), |c| (c.open, c.pending))
    }
}

/// A connection counted against its client: open while it lives, pending
/// until [`ClientConnection::request_arrived`].
pub(crate) struct ClientConnection {
    clients: Arc<Clients>,
    client: IpAddr,
    pending: AtomicBool,
}

impl ClientConnection {
    /// A whole request (head and body) has arrived, or was answered without
    /// its body being read: the connection is no longer pending. Later
    /// requests on it are bounded by the timeouts and the open bound.
    pub(crate) fn request_arrived(&self) {
        if self.pending.swap(false, Ordering::SeqCst) {
            if let Some(count) = self.clients.counts().get_mut(&self.client) {
                count.pending -= 1;
            }
        }
    }
}

impl Drop for ClientConnection {
    fn drop(&mut self) {
        let pending = *self.pending.get_mut();
        let mut counts = self.clients.counts();
        if let Some(count) = counts.get_mut(&self.client) {
            count.open -= 1;
            count.pending -= u32::from(pending);
            if count.open == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_is_bounded_in_open_and_pending_connections_and_its_counts_go_back_to_zero() {
        let clients = Clients::new(3, 2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = clients.admit(a).unwrap();
        let second = clients.admit(a).unwrap();
        let refused = clients.admit(a).err().expect("a third pending connection is refused");
        assert!(refused.contains("serve.max_pending_connections_per_client"), "{refused}");
        assert!(clients.admit(b).is_ok(), "another client is not affected");
        first.request_arrived();
        first.request_arrived();
        assert_eq!(clients.held(a), (2, 1), "a request counts once");
        let third = clients.admit(a).unwrap();
        let refused = clients.admit(a).err().expect("a fourth open connection is refused");
        assert!(refused.contains("serve.max_connections_per_client"), "{refused}");
        drop((first, second, third));
        assert_eq!(clients.held(a), (0, 0));
        assert!(clients.counts().is_empty(), "no entry is kept for a client without connections");
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_address_is_the_ipv4_one() {
        let clients = Clients::new(1, 1);
        let _held = clients.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(clients.admit("2001:db8:1:2:ffff::9".parse().unwrap()).is_err(), "same /64");
        assert!(clients.admit("2001:db8:1:3::1".parse().unwrap()).is_ok(), "another /64");
        let _v4 = clients.admit("192.0.2.7".parse().unwrap()).unwrap();
        assert!(clients.admit("::ffff:192.0.2.7".parse().unwrap()).is_err(), "the same IPv4 client");
    }
}
