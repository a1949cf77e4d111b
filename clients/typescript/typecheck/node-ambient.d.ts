// The few Node APIs index.js uses, declared for `tsc --noEmit` (there are
// no Node type definitions on this machine; Debian's node-typescript has
// none). Only for the check: users' own @types/node is not affected, as
// index.d.ts uses none of this.

interface BufferConstructor {
  from(data: string, encoding?: "utf8" | "base64"): Buffer;
  from(data: ArrayBufferLike, byteOffset?: number, length?: number): Buffer;
  from(data: Uint8Array | readonly number[]): Buffer;
  alloc(size: number): Buffer;
  concat(list: readonly Uint8Array[]): Buffer;
  isBuffer(x: unknown): x is Buffer;
}
interface Buffer extends Uint8Array {
  toString(encoding?: "utf8" | "base64" | "latin1"): string;
  subarray(start?: number, end?: number): Buffer;
  indexOf(value: number, byteOffset?: number): number;
  equals(other: Uint8Array): boolean;
}
declare var Buffer: BufferConstructor;

declare namespace NodeJS {
  interface Timeout { ref(): this; unref(): this }
  interface EventEmitter {
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: string, listener: (...args: any[]) => void): this;
    removeListener(event: string, listener: (...args: any[]) => void): this;
    removeAllListeners(event?: string): this;
  }
  interface ReadableStream extends EventEmitter { destroy(): void }
  interface WritableStream extends EventEmitter {
    write(data: string | Uint8Array): boolean;
    end(): void;
    destroy(): void;
  }
}
declare var process: {
  env: Record<string, string | undefined>;
  cwd(): string;
  pid: number;
};
declare function setTimeout(fn: (...args: any[]) => void, ms?: number): NodeJS.Timeout;
declare function clearTimeout(t: NodeJS.Timeout | undefined): void;
declare var console: { log(...a: unknown[]): void; warn(...a: unknown[]): void; error(...a: unknown[]): void };
interface AbortSignal { readonly aborted: boolean; readonly reason: unknown }
declare var AbortSignal: { prototype: AbortSignal };
declare class AbortController { readonly signal: AbortSignal; abort(reason?: unknown): void }

declare module "node:child_process" {
  class ChildProcess implements NodeJS.EventEmitter {
    readonly pid: number | undefined;
    readonly exitCode: number | null;
    readonly signalCode: string | null;
    readonly stdin: NodeJS.WritableStream | null;
    readonly stdout: NodeJS.ReadableStream & { destroy(): void } | null;
    kill(signal?: string): boolean;
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: string, listener: (...args: any[]) => void): this;
    removeListener(event: string, listener: (...args: any[]) => void): this;
    removeAllListeners(event?: string): this;
  }
  function spawn(command: string, args: readonly string[], options: {
    stdio?: unknown[]; env?: Record<string, string | undefined>; cwd?: string;
  }): ChildProcess;
}
declare module "node:fs" {
  function readFileSync(path: string): Buffer;
}
declare module "node:net" {
  class Socket implements NodeJS.ReadableStream, NodeJS.WritableStream {
    on(event: string, listener: (...args: any[]) => void): this;
    once(event: string, listener: (...args: any[]) => void): this;
    removeListener(event: string, listener: (...args: any[]) => void): this;
    removeAllListeners(event?: string): this;
    write(data: string | Uint8Array): boolean;
    end(): void;
    destroy(): void;
    setTimeout(ms: number, cb?: () => void): this;
  }
  function connect(options: { host: string; port: number }, listener?: () => void): Socket;
  function isIP(s: string): number;
}
declare module "node:tls" {
  import { Socket } from "node:net";
  interface PeerCertificate { subject: unknown }
  interface ConnectionOptions {
    host?: string; port?: number; servername?: string; ca?: string | Uint8Array | Buffer;
    minVersion?: string; checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined;
  }
  class TLSSocket extends Socket {}
  function connect(options: ConnectionOptions, listener?: () => void): TLSSocket;
  function checkServerIdentity(host: string, cert: PeerCertificate): Error | undefined;
}
