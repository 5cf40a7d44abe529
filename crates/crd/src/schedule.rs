//! A Blueprint's off-hours schedule (`spec.schedule`: when its previews stop for the night and
//! wake for the day, as cron expressions in a time zone), the shape the API server checks, and
//! what a schedule last did to a preview (`status.schedule`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The values one cron field takes: a number or name, a range, every (`*`), each with a step.
fn cron_field(value: &str) -> String {
    let item = format!("([*]|({value})(-({value}))?)([/][0-9]{{1,2}})?");
    format!("{item}(,{item})*")
}

/// The five standard cron fields (minute, hour, day of month, month, day of week, with month
/// and day names), as the API server checks them: ranges of values included, so `0 25 * * *`
/// is refused there. Written without backslashes, for CEL's strings.
pub fn cron_pattern() -> String {
    let fields = [
        "[0-5]?[0-9]",
        "[01]?[0-9]|2[0-3]",
        "0?[1-9]|[12][0-9]|3[01]",
        "0?[1-9]|1[0-2]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec",
        "[0-7]|sun|mon|tue|wed|thu|fri|sat",
    ];
    let fields: Vec<String> = fields.iter().map(|f| cron_field(f)).collect();
    format!("(?i)^ *{} *$", fields.join(" +"))
}

/// An IANA zone name's shape (`Europe/Paris`, `America/Argentina/Buenos_Aires`, `UTC`); whether
/// the zone exists is the controller's to say.
pub const TIME_ZONE_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$";

fn cron_rule(field: &str) -> String {
    format!("{field}.matches('{}')", cron_pattern())
}

/// When previews stop outside working hours and wake for them.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new(cron_rule("self.stop")).message("schedule.stop must be a cron expression of five fields (minute hour day-of-month month day-of-week), such as 0 20 * * 1-5").field_path(".stop"))]
#[x_kube(validation = Rule::new(format!("!has(self.wake) || {}", cron_rule("self.wake"))).message("schedule.wake must be a cron expression of five fields (minute hour day-of-month month day-of-week), such as 0 7 * * 1-5").field_path(".wake"))]
#[x_kube(validation = Rule::new(format!("!has(self.timeZone) || self.timeZone.matches('{TIME_ZONE_PATTERN}')")).message("schedule.timeZone must be an IANA time zone name, such as Europe/Paris").field_path(".timeZone"))]
#[serde(rename_all = "camelCase")]
pub struct ScheduleSpec {
    /// When running previews stop (cron, five fields: `0 20 * * 1-5` is 20:00 on weekdays).
    #[schemars(length(min = 1, max = 100))]
    pub stop: String,

    /// When the previews the schedule stopped wake (cron, `0 7 * * 1-5`). Unset: they stay
    /// stopped until a visit or other activity wakes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100))]
    pub wake: Option<String>,

    /// The IANA time zone the expressions are read in (`Europe/Paris`; default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: Option<String>,
}

/// What an off-hours schedule last did to a preview.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleRecord {
    pub state: ScheduleState,
    /// The stop instant it was stopped at, or the wake instant it was woken at (its idle time
    /// counts from then).
    pub at: Time,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleState {
    /// Stopped outside working hours: woken at the next wake instant, or by activity.
    Stopped,
    /// Woken at a wake instant.
    Woken,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_pattern_takes_standard_cron_and_nothing_else() {
        let re = regex::Regex::new(&cron_pattern()).unwrap();
        for ok in [
            "0 20 * * 1-5",
            "0 7 * * MON-FRI",
            "*/15 9-17 * * 1-5",
            "0,30 8 1,15 jan-jun sun",
            " 0  20 * * 0 ",
        ] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in [
            "0 25 * * *",
            "61 7 * * *",
            "0 20 * *",
            "0 0 20 * * 1-5",
            "@daily",
            "0 20 * * 8",
            "0 20 32 * *",
            "0 20 * 13 *",
            "",
            "0 20 * * 1-5'); true || ('",
        ] {
            assert!(!re.is_match(bad), "{bad:?}");
        }
        let zone = regex::Regex::new(TIME_ZONE_PATTERN).unwrap();
        assert!(zone.is_match("Europe/Paris") && zone.is_match("Etc/GMT+1"));
        assert!(!zone.is_match("../etc/passwd") && !zone.is_match("Europe/"));
        assert!(
            !cron_pattern().contains('\\') && !cron_pattern().contains('\''),
            "a CEL string as it is"
        );
    }
}
