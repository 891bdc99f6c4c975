//! `[ports]`: which protocol a destination port speaks, for the listeners
//! that are not told (SOCKS5 after `CONNECT`, the transparent listener).
//! Pure.

use super::Protocol;

/// The most ports one protocol may list.
pub const MAX_PER_PROTOCOL: usize = 64;

/// Each protocol's ports. A port belongs to one protocol at most.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortTable {
    /// In [`Protocol::ALL`]'s order.
    ports: Vec<(Protocol, Vec<u16>)>,
}

impl Default for PortTable {
    /// Each protocol's own ports: Gemini 1965, Gopher 70, Spartan 300, Nex
    /// 1900, HTTP 80, HTTPS 443 and 8443.
    fn default() -> PortTable {
        PortTable {
            ports: Protocol::ALL
                .iter()
                .map(|&p| (p, p.default_ports().to_vec()))
                .collect(),
        }
    }
}

impl PortTable {
    /// The table with `protocol`'s ports replaced by `ports`. An error says
    /// what is wrong: port 0, too many, or a port another protocol lists.
    pub fn with(mut self, protocol: Protocol, ports: &[u16]) -> Result<PortTable, String> {
        if ports.len() > MAX_PER_PROTOCOL {
            return Err(format!("{} ports: at most {MAX_PER_PROTOCOL}", ports.len()));
        }
        if ports.contains(&0) {
            return Err("port 0 is no port".to_string());
        }
        let mut list: Vec<u16> = Vec::with_capacity(ports.len());
        for &port in ports {
            if !list.contains(&port) {
                list.push(port);
            }
        }
        for (other, theirs) in &self.ports {
            if *other == protocol {
                continue;
            }
            if let Some(port) = list.iter().find(|p| theirs.contains(p)) {
                return Err(format!(
                    "port {port} is listed for {} too; a port speaks one protocol",
                    other.as_str()
                ));
            }
        }
        if let Some(entry) = self.ports.iter_mut().find(|(p, _)| *p == protocol) {
            entry.1 = list;
        }
        Ok(self)
    }

    /// The protocol `port` speaks, if the table lists it.
    pub fn protocol_of(&self, port: u16) -> Option<Protocol> {
        self.ports
            .iter()
            .find(|(_, ports)| ports.contains(&port))
            .map(|(p, _)| *p)
    }

    /// `protocol`'s ports.
    pub fn ports(&self, protocol: Protocol) -> &[u16] {
        self.ports
            .iter()
            .find(|(p, _)| *p == protocol)
            .map_or(&[], |(_, ports)| ports.as_slice())
    }

    /// Every port of the table, in protocol order.
    pub fn all(&self) -> Vec<u16> {
        self.ports
            .iter()
            .flat_map(|(_, ports)| ports.iter().copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_each_protocols_own_port() {
        let t = PortTable::default();
        assert_eq!(t.protocol_of(1965), Some(Protocol::Gemini));
        assert_eq!(t.protocol_of(70), Some(Protocol::Gopher));
        assert_eq!(t.protocol_of(300), Some(Protocol::Spartan));
        assert_eq!(t.protocol_of(1900), Some(Protocol::Nex));
        assert_eq!(t.protocol_of(80), Some(Protocol::Http));
        assert_eq!(t.protocol_of(8443), Some(Protocol::Https));
        assert_eq!(t.protocol_of(7070), None);
        assert_eq!(t.all(), [1965, 70, 300, 1900, 80, 443, 8443]);
    }

    #[test]
    fn a_port_speaks_one_protocol_and_silly_lists_are_refused() {
        let t = PortTable::default()
            .with(Protocol::Gopher, &[70, 7070, 7070])
            .unwrap();
        assert_eq!(t.ports(Protocol::Gopher), [70, 7070]);
        assert_eq!(t.protocol_of(7070), Some(Protocol::Gopher));
        let clash = t.clone().with(Protocol::Nex, &[7070]).unwrap_err();
        assert!(
            clash.contains("7070") && clash.contains("gopher"),
            "{clash}"
        );
        assert!(t.clone().with(Protocol::Nex, &[0]).is_err());
        let many: Vec<u16> = (2000..2100).collect();
        assert!(t.clone().with(Protocol::Nex, &many).is_err());
        // An empty list: the protocol is never chosen by port.
        let none = t.with(Protocol::Spartan, &[]).unwrap();
        assert_eq!(none.protocol_of(300), None);
    }
}
