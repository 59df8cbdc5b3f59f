// A reverse proxy that presents a bearer token on every request it passes on: the
// conformance suite sends no credential, so orch-cli/tests/conformance.rs runs it through
// this to reach `orch mcp` the way a shared gateway is reached, with a run's token from
// `POST /runs`. Bodies and answers (SSE streams included) are piped as they come.
//
// Usage: node auth-proxy.mjs <port> <target origin> <token>
import http from 'node:http'

const [, , port, target, token] = process.argv
http
  .createServer((req, res) => {
    const url = new URL(req.url, target)
    const headers = { ...req.headers, host: url.host, authorization: `Bearer ${token}` }
    const upstream = http.request(url, { method: req.method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    })
    upstream.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502)
      res.end(String(e))
    })
    res.on('close', () => upstream.destroy())
    req.pipe(upstream)
  })
  .listen(Number(port), '127.0.0.1')
