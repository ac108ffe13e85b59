// Errors as one line of text for logs and messages.
/** An error as one line of text: its message, with the errno code (ECONNREFUSED…) when the message lacks it. */
export function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}
