//! IPv4 subnets: parsed, compared, and the one a new network gets: the first
//! private /16 that no route of the host and no other network overlaps.

use super::NetworkError;
use crate::path_io::PathIoError;
use std::net::Ipv4Addr;

/// An IPv4 subnet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

impl Subnet {
    pub fn parse(s: &str) -> Result<Subnet, String> {
        let (addr, len) = s
            .split_once('/')
            .ok_or_else(|| format!("invalid subnet {s:?}: expected a.b.c.d/len"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|e| format!("invalid subnet {s:?}: {e}"))?;
        let prefix_len: u8 = len
            .parse()
            .ok()
            .filter(|l| (8..=30).contains(l))
            .ok_or_else(|| format!("invalid subnet {s:?}: the prefix length must be 8 to 30"))?;
        let subnet = Subnet { addr, prefix_len };
        Ok(Subnet {
            addr: Ipv4Addr::from(u32::from(addr) & subnet.mask()),
            prefix_len,
        })
    }

    pub(super) fn mask(self) -> u32 {
        u32::MAX << (32 - u32::from(self.prefix_len))
    }

    pub fn gateway(self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) + 1)
    }

    fn overlaps(self, addr: u32, mask: u32) -> bool {
        let common = self.mask() & mask;
        u32::from(self.addr) & common == addr & common
    }

    pub(super) fn overlaps_subnet(self, other: Subnet) -> bool {
        self.overlaps(u32::from(other.addr), other.mask())
    }

    /// Whether `ip` is an address a host of the subnet may have (not the
    /// subnet's own address nor its broadcast).
    pub fn holds_host(self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        let base = u32::from(self.addr);
        ip & self.mask() == base && ip != base && ip != base | !self.mask()
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// The routes of `/proc/net/route` as (interface, destination, mask),
/// host order; the default route left out.
fn parse_iface_routes(table: &str) -> Vec<(&str, u32, u32)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let iface = *fields.first()?;
            let dest = u32::from_str_radix(fields.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(fields.get(7)?, 16).ok()?;
            // The file prints the network-order words as native integers.
            Some((iface, u32::from_be(dest), u32::from_be(mask)))
        })
        .filter(|&(_, _, mask)| mask != 0)
        .collect()
}

/// The routes of `/proc/net/route` as (destination, mask), host order.
fn parse_routes(table: &str) -> Vec<(u32, u32)> {
    parse_iface_routes(table)
        .into_iter()
        .map(|(_, dest, mask)| (dest, mask))
        .collect()
}

pub(super) fn route_table() -> Result<String, NetworkError> {
    let path = std::path::Path::new("/proc/net/route");
    Ok(std::fs::read_to_string(path).map_err(PathIoError::at("read", path))?)
}

pub(super) fn host_routes() -> Result<Vec<(u32, u32)>, NetworkError> {
    Ok(parse_routes(&route_table()?))
}

/// The default bridge's subnet when none is given or kept: the one its
/// bridge already routes (left by an earlier holdfastd, which does not
/// remove it: containers may still use it), else the first free one. A
/// new choice beside that bridge would collide with its own route and
/// be refused by the bridge plugin.
pub(super) fn default_subnet(table: &str, bridge: &str) -> Option<Subnet> {
    let routes = parse_iface_routes(table);
    let own = routes
        .iter()
        .find(|&&(iface, _, _)| iface == bridge)
        .and_then(|&(_, dest, mask)| {
            Some(Subnet {
                addr: Ipv4Addr::from(dest),
                prefix_len: u8::try_from(mask.count_ones()).ok()?,
            })
        });
    own.or_else(|| {
        let others: Vec<(u32, u32)> = routes.iter().map(|&(_, d, m)| (d, m)).collect();
        choose_subnet(&others)
    })
}

/// The first of 172.17/16 .. 172.31/16, then 10.200/16 .. 10.254/16, that
/// no route of the host overlaps (the default route aside).
pub fn choose_subnet(routes: &[(u32, u32)]) -> Option<Subnet> {
    let candidates = (17..=31u8)
        .map(|b| Ipv4Addr::new(172, b, 0, 0))
        .chain((200..=254u8).map(|b| Ipv4Addr::new(10, b, 0, 0)));
    candidates
        .map(|addr| Subnet {
            addr,
            prefix_len: 16,
        })
        .find(|s| !routes.iter().any(|&(a, m)| s.overlaps(a, m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_and_normalise() {
        let s = Subnet::parse("10.1.2.3/24").expect("valid");
        assert_eq!(s.to_string(), "10.1.2.0/24");
        assert_eq!(s.gateway(), Ipv4Addr::new(10, 1, 2, 1));
        assert!(Subnet::parse("10.1.2.0").is_err());
        assert!(Subnet::parse("10.1.2.0/33").is_err());
        assert!(Subnet::parse("nope/24").is_err());
    }

    #[test]
    fn the_chosen_subnet_avoids_the_host_routes() {
        let table = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
br1\t000012AC\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let routes = parse_routes(table);
        assert_eq!(routes.len(), 2, "the default route is no obstacle");
        let s = choose_subnet(&routes).expect("one is free");
        assert_eq!(s.to_string(), "172.19.0.0/16");
    }

    #[test]
    fn the_default_bridge_keeps_the_subnet_its_bridge_already_routes() {
        let table = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
holdfast0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        let s = default_subnet(table, "holdfast0").expect("its own");
        assert_eq!(s.to_string(), "172.17.0.0/16");
        // Another bridge's route is an obstacle, not a choice.
        let s = default_subnet(table, "hf1").expect("one is free");
        assert_eq!(s.to_string(), "172.18.0.0/16");
    }
}
