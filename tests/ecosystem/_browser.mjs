// What the inbox browser scripts share (inbox-*.mjs): the API as a signed-in client calls it, the
// WCAG 2 contrast of an element's text in each of its states, axe-core's source and violations,
// Debian's Chromium started headless on a profile of its own, and what a script does when it fails.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
export const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

// `graphql(query, variables)` → data, throwing on errors; `start(agentId, prompt)` → the runId of a
// run that suspended, throwing otherwise. Both as the bearer of `apiKey`.
export function api(baseUrl, apiKey) {
  async function graphql(query, variables = {}) {
    const response = await fetch(`${baseUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = await response.json();
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  }
  async function start(agentId, prompt) {
    const data = await graphql(
      'mutation S($input: StartRunInput!) { startRun(input: $input) { ... on RunOutcome { runId status } } }',
      { input: { agentId, prompt } },
    );
    if (data.startRun.status !== 'SUSPENDED') throw new Error(`did not suspend: ${JSON.stringify(data)}`);
    return data.startRun.runId;
  }
  return { graphql, start };
}

// WCAG 2 contrast of an element's text with the background it is drawn on (ancestors' when its own
// is transparent), in the element's current state. Runs in the page (`el.evaluate(contrastOf)`), so
// it uses nothing from this module.
export function contrastOf(el) {
  const parse = (value) => {
    const m = /rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)/.exec(value);
    return m ? [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])] : [0, 0, 0, 1];
  };
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat(1);
  let background = [255, 255, 255, 1];
  const layers = [];
  for (let node = el; node && node.nodeType === 1; node = node.parentElement) layers.push(parse(getComputedStyle(node).backgroundColor));
  for (const layer of layers.reverse()) background = over(layer, background);
  const text = over(parse(getComputedStyle(el).color), background);
  const luminance = ([r, g, b]) => {
    const [R, G, B] = [r, g, b].map((c) => {
      const s = c / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * R + 0.7152 * G + 0.0722 * B;
  };
  const [l1, l2] = [luminance(text), luminance(background)].sort((a, b) => b - a);
  return { ratio: Math.round(((l1 + 0.05) / (l2 + 0.05)) * 100) / 100, color: getComputedStyle(el).color, background: `rgb(${background.slice(0, 3).map(Math.round).join(', ')})` };
}

// The contrast of `el`'s text (`contrastOf`) at rest, hovered, focused, and hovered while focused:
// { rest, hover, focus, hoverFocus }. `rest()` moves the pointer and the focus away from it.
export async function contrastStates(el, rest) {
  await rest();
  const states = { rest: await el.evaluate(contrastOf) };
  await el.hover();
  states.hover = await el.evaluate(contrastOf);
  await rest();
  await el.focus();
  states.focus = await el.evaluate(contrastOf);
  await el.hover();
  states.hoverFocus = await el.evaluate(contrastOf);
  await rest();
  return states;
}

// axe-core's violations on `page` as it is now: [{ id, impact, help, nodes: [selector] }]. axe-core
// is evaluated once per document, through devtools: not subject to the page's CSP.
export async function axeViolations(page) {
  if (!(await page.evaluate(() => Boolean(window.axe)))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) }));
  });
}

// A script stopped by `error`: prints it and `out` (what was recorded so far) on stderr, saves the
// browser's first page to `screenshot` when there is one, and sets exit status 1.
export async function failed(error, out, context, screenshot) {
  process.stderr.write(`${error.stack || error}\n${JSON.stringify(out)}\n`);
  try {
    await context.pages()[0].screenshot({ path: screenshot, fullPage: true });
  } catch {
    // no page to capture
  }
  process.exitCode = 1;
}

// Chromium (CHROMIUM_BIN, else /usr/bin/chromium) on a new profile: { context, close }, where close()
// ends the browser and removes the profile.
export async function launchChromium() {
  const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
