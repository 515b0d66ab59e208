/**
 * Headers as the application has them: a Fetch `Headers`, a plain object
 * (Node's `req.headers`, whose values may be arrays), or a list of
 * name/value pairs in which a repeated header is two entries.
 */
export type HeadersInput =
  | Headers
  | Record<string, string | readonly string[] | undefined>
  | Iterable<readonly [string, string]>;

function isFetchHeaders(headers: HeadersInput): headers is Headers {
  return typeof Headers !== "undefined" && headers instanceof Headers;
}

function isIterable(headers: HeadersInput): headers is Iterable<readonly [string, string]> {
  return typeof (headers as Iterable<unknown>)[Symbol.iterator] === "function";
}

/**
 * Every value of the header `name` (any case). A Fetch `Headers` and Node's
 * `req.headers` already joined a repeated header into one value with ", ";
 * an array or a list of pairs keeps each occurrence apart.
 */
export function headerValues(headers: HeadersInput, name: string): string[] {
  const wanted = name.toLowerCase();
  if (isFetchHeaders(headers)) {
    const value = headers.get(wanted);
    return value === null ? [] : [value];
  }
  const values: string[] = [];
  const entries: Iterable<readonly [string, string | readonly string[] | undefined]> = isIterable(headers)
    ? headers
    : Object.entries(headers);
  for (const [header, value] of entries) {
    if (header.toLowerCase() !== wanted || value === undefined) continue;
    if (typeof value === "string") values.push(value);
    else values.push(...value);
  }
  return values;
}
