//! Where a webhook may be sent: no server-side request forgery.
//!
//! A target's host must neither be nor resolve to a loopback, private, link-local (the cloud
//! metadata address 169.254.169.254 among them), shared (CGNAT), multicast, broadcast or
//! unspecified address, in IPv4 or IPv6, IPv4-mapped IPv6 included. The check runs at
//! registration and again at every delivery, and the delivering client resolves names through
//! [`Targets::resolver`], which drops refused addresses from each answer: the address actually
//! connected to is one that was checked, so a name that rebinds to a private address between
//! check and connect is not connected to. Literal addresses never reach a resolver; [`Targets::check`]
//! refuses them before the request is sent.
//!
//! `DOCKET_WEBHOOK_ALLOW_LOOPBACK=true` permits loopback targets only (local integrations,
//! tests); nothing permits the rest.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::Url;

/// Resolves host names; the system's resolver in production, a table in tests.
pub trait Lookup: Send + Sync + 'static {
    /// The addresses `host` names (ports are the caller's).
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'static>>;
}

/// The system resolver (`getaddrinfo`, through tokio).
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'static>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// Why a target is refused. People read the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("the webhook URL is not valid: {0}")]
    Invalid(String),
    #[error("the webhook URL must use http or https")]
    Scheme,
    #[error("the webhook URL's host {host} is {what} ({addr}); webhooks are not sent there")]
    Refused {
        host: String,
        addr: IpAddr,
        what: &'static str,
    },
    #[error("the webhook URL's host {host} does not resolve: {error}")]
    Unresolved { host: String, error: String },
}

/// The policy for webhook targets, and the resolver it checks names with.
#[derive(Clone)]
pub struct Targets {
    /// Loopback targets permitted (`DOCKET_WEBHOOK_ALLOW_LOOPBACK`).
    pub allow_loopback: bool,
    lookup: Arc<dyn Lookup>,
}

impl std::fmt::Debug for Targets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Targets")
            .field("allow_loopback", &self.allow_loopback)
            .finish_non_exhaustive()
    }
}

impl Default for Targets {
    fn default() -> Self {
        Self::new(false)
    }
}

impl Targets {
    /// The system resolver; loopback permitted when `allow_loopback`.
    pub fn new(allow_loopback: bool) -> Self {
        Self::with_lookup(allow_loopback, Arc::new(SystemLookup))
    }

    /// Names resolved by `lookup`.
    pub fn with_lookup(allow_loopback: bool, lookup: Arc<dyn Lookup>) -> Self {
        Self {
            allow_loopback,
            lookup,
        }
    }

    /// What is wrong with sending to `addr`, if anything.
    pub fn refusal(&self, addr: IpAddr) -> Option<&'static str> {
        match classify(addr) {
            Class::Public => None,
            Class::Loopback if self.allow_loopback => None,
            Class::Loopback => Some("a loopback address"),
            Class::Refused(what) => Some(what),
        }
    }

    /// Parses and checks `url`: http(s), and its host (or every address it resolves to) a
    /// permitted address.
    pub async fn check(&self, url: &str) -> Result<Url, TargetError> {
        let parsed = Url::parse(url).map_err(|err| TargetError::Invalid(err.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(TargetError::Scheme);
        }
        let host = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => Host::Ip(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Host::Ip(IpAddr::V6(v6)),
            Some(url::Host::Domain(name)) => Host::Name(name.to_owned()),
            None => return Err(TargetError::Invalid("it has no host".into())),
        };
        let (name, addrs) = match host {
            Host::Ip(ip) => (ip.to_string(), vec![ip]),
            Host::Name(name) => {
                let addrs =
                    self.lookup
                        .lookup(&name)
                        .await
                        .map_err(|err| TargetError::Unresolved {
                            host: name.clone(),
                            error: err.to_string(),
                        })?;
                if addrs.is_empty() {
                    return Err(TargetError::Unresolved {
                        host: name,
                        error: "no address".into(),
                    });
                }
                (name, addrs)
            }
        };
        for addr in addrs {
            if let Some(what) = self.refusal(addr) {
                return Err(TargetError::Refused {
                    host: name,
                    addr,
                    what,
                });
            }
        }
        Ok(parsed)
    }

    /// A resolver for the delivering client that answers only permitted addresses.
    pub fn resolver(&self) -> Arc<FilteringResolver> {
        Arc::new(FilteringResolver {
            targets: self.clone(),
        })
    }
}

enum Host {
    Ip(IpAddr),
    Name(String),
}

/// The client's resolver: a name's permitted addresses, or an error when it has none.
pub struct FilteringResolver {
    targets: Targets,
}

impl reqwest::dns::Resolve for FilteringResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let targets = self.targets.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = targets.lookup.lookup(&host).await?;
            let permitted: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|addr| targets.refusal(*addr).is_none())
                .map(|addr| SocketAddr::new(addr, 0))
                .collect();
            if permitted.is_empty() {
                let refused: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves only to addresses webhooks are not sent to").into();
                return Err(refused);
            }
            let addrs: reqwest::dns::Addrs = Box::new(permitted.into_iter());
            Ok(addrs)
        })
    }
}

/// What kind of address an address is, as far as webhooks care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Public,
    Loopback,
    Refused(&'static str),
}

fn classify(addr: IpAddr) -> Class {
    match addr {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(v4: Ipv4Addr) -> Class {
    let [a, b, ..] = v4.octets();
    if v4.is_loopback() {
        Class::Loopback
    } else if v4.is_unspecified() || a == 0 {
        Class::Refused("an unspecified address")
    } else if v4.is_private() {
        Class::Refused("a private address")
    } else if v4.is_link_local() {
        Class::Refused("a link-local address (cloud metadata among them)")
    } else if a == 100 && (64..128).contains(&b) {
        Class::Refused("a shared (carrier-grade NAT) address")
    } else if v4.is_multicast() {
        Class::Refused("a multicast address")
    } else if v4.is_broadcast() || a >= 240 {
        Class::Refused("a reserved address")
    } else {
        Class::Public
    }
}

fn classify_v6(v6: Ipv6Addr) -> Class {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let first = v6.segments()[0];
    if v6.is_loopback() {
        Class::Loopback
    } else if v6.is_unspecified() {
        Class::Refused("an unspecified address")
    } else if v6.is_multicast() {
        Class::Refused("a multicast address")
    } else if first & 0xffc0 == 0xfe80 {
        Class::Refused("a link-local address")
    } else if first & 0xfe00 == 0xfc00 {
        Class::Refused("a private (unique local) address")
    } else if v6.segments()[..6] == [0, 0, 0, 0, 0, 0] {
        // IPv4-compatible (deprecated) addresses: judge the IPv4 address they carry.
        classify_v4(last_32_bits(v6))
    } else if v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64: the IPv4 address it translates to.
        classify_v4(last_32_bits(v6))
    } else {
        Class::Public
    }
}

/// The IPv4 address in the low 32 bits of `v6` (compatible and NAT64 forms carry it there).
fn last_32_bits(v6: Ipv6Addr) -> Ipv4Addr {
    // Truncation keeps exactly the low 32 bits.
    Ipv4Addr::from(u128::from(v6) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(targets: &Targets, addr: &str) -> bool {
        targets.refusal(addr.parse().expect("an address")).is_some()
    }

    #[test]
    fn private_link_local_multicast_and_unspecified_addresses_are_refused_in_both_families() {
        let strict = Targets::new(false);
        for addr in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "224.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
        ] {
            assert!(refused(&strict, addr), "{addr} should be refused");
        }
        for addr in ["93.184.215.14", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(!refused(&strict, addr), "{addr} should be permitted");
        }
    }

    #[test]
    fn the_loopback_flag_permits_loopback_and_nothing_else() {
        let loopback = Targets::new(true);
        for addr in ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"] {
            assert!(!refused(&loopback, addr), "{addr} should be permitted");
        }
        for addr in ["10.0.0.1", "169.254.169.254", "::", "fe80::1", "0.0.0.0"] {
            assert!(refused(&loopback, addr), "{addr} should still be refused");
        }
    }
}
