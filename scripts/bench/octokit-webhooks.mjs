// The same measurement as benches/webhook.rs's "verify + parse", with @octokit/webhooks:
// verifyAndReceive (HMAC check, JSON parse, dispatch to a handler) on one payload file.
import { Webhooks } from "@octokit/webhooks";
import { readFileSync } from "node:fs";
import { createHmac } from "node:crypto";

const body = readFileSync(process.argv[2], "utf8");
const secret = "bench-secret";
const signature = "sha256=" + createHmac("sha256", secret).update(body).digest("hex");
const webhooks = new Webhooks({ secret });
let handled = 0;
webhooks.on("pull_request", () => { handled++; });
const deliver = () => webhooks.verifyAndReceive({ id: "bench", name: "pull_request", payload: body, signature });
const rounds = 20000;
for (let i = 0; i < 2000; i++) await deliver();
const start = process.hrtime.bigint();
for (let i = 0; i < rounds; i++) await deliver();
const perDelivery = Number(process.hrtime.bigint() - start) / rounds / 1000;
console.log(`@octokit/webhooks verifyAndReceive (${Buffer.byteLength(body)} byte payload): ${perDelivery.toFixed(1)} µs per delivery (${handled} handled)`);
