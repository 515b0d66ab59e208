//! The benchmarks' delivery body: shared by the core's criterion bench and
//! the gateway's body-size bench, so both measure the same JSON.

/// A payment-event-like JSON body of about `size` bytes (a little more:
/// whole line items).
pub fn body_of(size: usize) -> String {
    let mut items = Vec::new();
    let mut length = 0;
    while length < size {
        let index = items.len();
        let item = format!(
            r#"{{"sku":"sku_{index:06}","quantity":{},"unit_amount":{},"description":"line item number {index}"}}"#,
            index % 7 + 1,
            1000 + index * 3
        );
        length += item.len() + 1;
        items.push(item);
    }
    format!(
        r#"{{"id":"evt_bench_1","type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_1","amount":123456,"currency":"eur","items":[{}]}}}}}}"#,
        items.join(",")
    )
}
