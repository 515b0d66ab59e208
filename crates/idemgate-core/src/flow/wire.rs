//! The coordinator's calls and answers as one line of words: holders are
//! object names (hex, or the coordinator's own name, with no spaces) and
//! every other field a number, so a line is enough, and far smaller in the
//! wasm than serde's enums.
//!
//! - `acquire <holder> <accepted_at> <lease_ms> <wait 0|1> <max|-> <rate|->`
//! - `release <holder> <grant> <max|-> <rate|->`
//! - `status`
//! - answers: `granted <grant> <lease_ms>`, `queued <retry_at>`, `busy <retry_after_ms>`;
//!   a status is `<permits_in_use> <waiting> <oldest_wait_ms|->`.

use super::{FlowCall, FlowLimits, FlowStatus, PermitReply, PermitRequest};

impl FlowCall {
    pub fn encode(&self) -> String {
        match self {
            FlowCall::Acquire(request) => format!(
                "acquire {} {} {} {} {}",
                request.holder,
                request.accepted_at,
                request.lease_ms,
                u8::from(request.wait),
                limits(&request.limits)
            ),
            FlowCall::Release {
                holder,
                grant,
                limits: of,
            } => format!("release {holder} {grant} {}", limits(of)),
            FlowCall::Status => "status".to_string(),
        }
    }

    pub fn decode(line: &str) -> Result<FlowCall, String> {
        let mut words = Words(line.split_ascii_whitespace(), line);
        let call = match words.next()? {
            "acquire" => FlowCall::Acquire(PermitRequest {
                holder: words.next()?.to_string(),
                accepted_at: words.number()?,
                lease_ms: words.number()?,
                wait: words.number()? == 1,
                limits: words.limits()?,
            }),
            "release" => FlowCall::Release {
                holder: words.next()?.to_string(),
                grant: words.number()?,
                limits: words.limits()?,
            },
            "status" => FlowCall::Status,
            _ => return Err(words.malformed()),
        };
        words.end()?;
        Ok(call)
    }
}

impl PermitReply {
    pub fn encode(&self) -> String {
        match self {
            PermitReply::Granted { grant, lease_ms } => format!("granted {grant} {lease_ms}"),
            PermitReply::Queued { retry_at } => format!("queued {retry_at}"),
            PermitReply::Busy { retry_after_ms } => format!("busy {retry_after_ms}"),
        }
    }

    pub fn decode(line: &str) -> Result<PermitReply, String> {
        let mut words = Words(line.split_ascii_whitespace(), line);
        let reply = match words.next()? {
            "granted" => PermitReply::Granted {
                grant: words.number()?,
                lease_ms: words.number()?,
            },
            "queued" => PermitReply::Queued {
                retry_at: words.number()?,
            },
            "busy" => PermitReply::Busy {
                retry_after_ms: words.number()?,
            },
            _ => return Err(words.malformed()),
        };
        words.end()?;
        Ok(reply)
    }
}

impl FlowStatus {
    pub fn encode(&self) -> String {
        format!(
            "{} {} {}",
            self.permits_in_use,
            self.waiting,
            optional(self.oldest_wait_ms)
        )
    }

    pub fn decode(line: &str) -> Result<FlowStatus, String> {
        let mut words = Words(line.split_ascii_whitespace(), line);
        let status = FlowStatus {
            permits_in_use: words.number()?,
            waiting: words.number()?,
            oldest_wait_ms: words.optional()?,
        };
        words.end()?;
        Ok(status)
    }
}

fn limits(limits: &FlowLimits) -> String {
    format!(
        "{} {}",
        optional(limits.max_in_flight.map(u64::from)),
        optional(limits.rate_thousandths)
    )
}

fn optional(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |value| value.to_string())
}

struct Words<'a, I: Iterator<Item = &'a str>>(I, &'a str);

impl<'a, I: Iterator<Item = &'a str>> Words<'a, I> {
    fn malformed(&self) -> String {
        format!("a malformed flow message: {:?}", self.1)
    }

    fn next(&mut self) -> Result<&'a str, String> {
        self.0.next().ok_or_else(|| self.malformed())
    }

    fn number(&mut self) -> Result<u64, String> {
        self.next()?.parse().map_err(|_| self.malformed())
    }

    fn optional(&mut self) -> Result<Option<u64>, String> {
        match self.next()? {
            "-" => Ok(None),
            word => word.parse().map(Some).map_err(|_| self.malformed()),
        }
    }

    fn limits(&mut self) -> Result<FlowLimits, String> {
        let max_in_flight = match self.optional()? {
            Some(max) => Some(u32::try_from(max).map_err(|_| self.malformed())?),
            None => None,
        };
        Ok(FlowLimits {
            max_in_flight,
            rate_thousandths: self.optional()?,
            shards: 1,
        })
    }

    fn end(&mut self) -> Result<(), String> {
        match self.0.next() {
            None => Ok(()),
            Some(_) => Err(self.malformed()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_as_written() {
        let limits = FlowLimits {
            max_in_flight: Some(4),
            rate_thousandths: Some(500),
            shards: 1,
        };
        let calls = [
            FlowCall::Acquire(PermitRequest {
                holder: "ab".repeat(32),
                accepted_at: 1_700_000_000_000,
                lease_ms: 15_000,
                wait: true,
                limits,
            }),
            FlowCall::Release {
                holder: "cd".repeat(32),
                grant: 7,
                limits: FlowLimits::default(),
            },
            FlowCall::Status,
        ];
        for call in calls {
            assert_eq!(FlowCall::decode(&call.encode()), Ok(call));
        }
        for reply in [
            PermitReply::Granted {
                grant: 3,
                lease_ms: 15_000,
            },
            PermitReply::Queued { retry_at: 9 },
            PermitReply::Busy {
                retry_after_ms: 100,
            },
        ] {
            assert_eq!(PermitReply::decode(&reply.encode()), Ok(reply));
        }
        let status = FlowStatus {
            permits_in_use: 4,
            waiting: 10,
            oldest_wait_ms: None,
        };
        assert_eq!(FlowStatus::decode(&status.encode()), Ok(status));
    }

    #[test]
    fn a_malformed_message_is_an_error() {
        for line in [
            "",
            "acquire",
            "acquire a 1 2 3",
            "release a x - -",
            "status extra",
            "granted",
        ] {
            assert!(
                FlowCall::decode(line).is_err() || PermitReply::decode(line).is_err(),
                "{line:?}"
            );
        }
        assert!(FlowCall::decode("acquire a 1 2 1 - - more").is_err());
        assert!(PermitReply::decode("granted -1").is_err());
    }
}
