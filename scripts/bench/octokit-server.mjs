// The peer of `sandcastle serve` in scripts/bench-webhook-peer: an HTTP server that receives
// GitHub webhooks the way a Probot app does, with @octokit/webhooks' createNodeMiddleware
// (content-type and header checks, HMAC verification, JSON parse, dispatch) and a no-op handler.
// Usage: node octokit-server.mjs PORT SECRET
import { createServer } from "node:http";
import { Webhooks, createNodeMiddleware } from "@octokit/webhooks";

const [port, secret] = process.argv.slice(2);
const webhooks = new Webhooks({ secret });
webhooks.onAny(() => {});
const middleware = createNodeMiddleware(webhooks, { path: "/github/webhook" });
createServer((req, res) => {
  if (req.url === "/healthz") {
    res.end("ok\n");
    return;
  }
  middleware(req, res, () => {
    res.statusCode = 404;
    res.end();
  });
}).listen(Number(port), "127.0.0.1", () => console.log(`listening on 127.0.0.1:${port}`));
