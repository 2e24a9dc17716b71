// Formatting for people: ages, times, money, GPU counts. Pure functions (the browser tests exercise them
// through the pages they render).

/** "42s", "5m", "3h 20m", "2d 4h": a duration in the two largest units that matter. */
export function formatDuration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return m % 60 ? `${hours}h ${m % 60}m` : `${hours}h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days}d ${hours % 24}h` : `${days}d`;
}

/** "2026-11-30 15:04:05 UTC": the cluster runs on UTC, and so does every time on the dashboard. */
export function formatTime(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** Integer cents → "$1,234.56" in the policy's currency. Cents stay integers until this point. */
export function formatMoney(cents, currency = "USD") {
  if (cents === null || cents === undefined || !Number.isFinite(Number(cents))) return "–";
  const amount = Number(cents) / 100;
  try {
    return new Intl.NumberFormat("en-US", { style: "currency", currency }).format(amount);
  } catch {
    return `${amount.toFixed(2)} ${currency}`;
  }
}

/** GPU-hours: one decimal, two below 10 (so a few minutes on one GPU is not shown as nothing). */
// GPU-hours everywhere with two decimals, as invoices and `commons chargeback` print them: one
// rounding rule, so the same figure never reads 9.99 on one table and 10.0 on another.
export function formatHours(hours) {
  if (hours === null || hours === undefined || !Number.isFinite(Number(hours))) return "–";
  return Number(hours).toLocaleString("en-US", { maximumFractionDigits: 2, minimumFractionDigits: 2 });
}

export function plural(n, word, many = `${word}s`) {
  return `${n} ${n === 1 ? word : many}`;
}

/** "YYYY-MM" of a date, in UTC (the chargeback period of the current month). */
export function monthOf(date) {
  return date.toISOString().slice(0, 7);
}

const ACTIVE = new Set(["pending", "admitted", "running", "preempting"]);
export const isActiveState = (state) => ACTIVE.has(state);

/**
 * Split a command line into argv the way a POSIX shell would for simple input: whitespace separates
 * words, single quotes keep everything, double quotes keep everything but \" and \\, a backslash
 * escapes the next character. Returns {argv} or {error} (an unclosed quote).
 * The task runs this argv directly (no shell), so `a | b` needs an explicit `sh -c '…'`.
 */
export function splitCommand(text) {
  const argv = [];
  let word = "";
  let inWord = false;
  let quote = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && (text[i + 1] === '"' || text[i + 1] === "\\")) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\" && i + 1 < text.length) {
      word += text[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) argv.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) return { error: `the command has an unclosed ${quote === "'" ? "single" : "double"} quote` };
  if (inWord) argv.push(word);
  return { argv };
}

/** Render argv back as one line a person can read and paste into a shell. */
export function joinCommand(argv) {
  return (argv || [])
    .map((a) => (a === "" || /[^\w@%+=:,./-]/.test(a) ? `'${a.replaceAll("'", "'\"'\"'")}'` : a))
    .join(" ");
}
