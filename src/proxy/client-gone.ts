/**
 * The client went away (while its body was read, or while it waited for admission); there is no
 * one left to answer.
 */
export class ClientGoneError extends Error {
  constructor() {
    super("client disconnected");
    this.name = "ClientGoneError";
  }
}
